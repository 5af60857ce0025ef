// Issue 19 item 8 (docs/design.md §5.3), pure: the leases of a controller-state record, decoded from JSON,
// keep a holder (or class) whose id is "__proto__" like any other (no broker involved).
import assert from "node:assert/strict";
import { it } from "node:test";
import { decodeLeases, encodeLeases } from "../src/controller-state-leases.ts";

it("a holder and a class named __proto__ survive encode → JSON → decode", () => {
  const raw = JSON.parse('{"tasks":{"holders":{"__proto__":{"__proto__":3},"constructor":{"default":2}},"request_ids":[]}}') as Record<string, unknown>;
  const decoded = decodeLeases(raw);
  const holders = decoded?.["tasks"]?.holders ?? {};
  assert.deepEqual(Object.keys(holders).sort(), ["__proto__", "constructor"]);
  assert.equal(Object.getOwnPropertyDescriptor(Object.getOwnPropertyDescriptor(holders, "__proto__")?.value, "__proto__")?.value, 3);
  const again = decodeLeases(JSON.parse(JSON.stringify(encodeLeases(decoded ?? {}))));
  assert.deepEqual(Object.keys(again?.["tasks"]?.holders ?? {}).sort(), ["__proto__", "constructor"]);
});
