// slow: 100,000 keys made by requests, and walks of them all to compare with (scripts/run-test-files.mjs)
// A failover leader's write after a grant on one key of 100,000 remembered ones looks at that key only
// (docs/design.md §5.3, §11.4: "100,000 keys live on one controller"), writes what a walk of every
// key writes, and costs a small part of that walk's CPU time. Virtual time: no key refills meanwhile.
import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { ManualClock } from "@sluice/core";
import type { CallContext } from "@sluice/protocol";
import { validateDynamicSpec } from "@sluice/spec";
import { Controller } from "../src/index.ts";
import { WrittenRecords } from "../src/failover/written-records.ts";
import { FullWalkWrites, sortedWrite } from "./full-walk-writes.ts";

const KEYS = 100_000;
const LEASED_KEYS = 1_000;
/** The walk costs ~10,000 times a one-key write here; a twentieth leaves room for a loaded machine and a GC pause. */
const MAX_SHARE_OF_WALK = 1 / 20;

const context: CallContext = { deadlineAt: null, signal: new AbortController().signal, metadata: {} };

function cpuMs<T>(work: () => T): { result: T; ms: number } {
  const start = process.cpuUsage();
  const result = work();
  const used = process.cpuUsage(start);
  return { result, ms: (used.user + used.system) / 1_000 };
}

describe("a leader's write at 100,000 keys", () => {
  it(`after a grant on 1 key of ${KEYS} not full (and ${LEASED_KEYS} keys with units held) looks at that key only`, async () => {
    const clock = new ManualClock(1_700_000_000_000);
    const parsed = validateDynamicSpec({
      throttlers: {
        per_customer: { limit: 1, period: "100s", keyed: { max_keys: KEYS } },
        per_model: { kind: "concurrency", limit: 4, lease_timeout: "30s", keyed: { max_keys: KEYS } },
      },
    });
    assert.ok(parsed.ok, parsed.ok ? "" : JSON.stringify(parsed.issues));
    const controller = new Controller({ dynamicSpec: parsed.value, computations: [], clock, onLeasesChanged: () => {} });
    const ask = (throttlerId: string, key: string, amount: number, requestId = "") => {
      const granted = controller.requestQuotaNow({ throttlerId, clientId: "w0", amount, timestampMs: 0, quotaClassId: "", requestId, key }, context);
      return Promise.resolve(granted);
    };
    // Every key 50 units short of its 100: 50 s from full at 1/s, so every one has a record all along.
    for (let i = 0; i < KEYS; i++) await ask("per_customer", `customer-${i}`, 50);
    for (let i = 0; i < LEASED_KEYS; i++) await ask("per_model", `model-${i}`, 1, `lease-${i}`);

    const walk = new FullWalkWrites();
    const records = new WrittenRecords();
    const first = records.changes(controller, 1, clock.now());
    records.committed(first, clock.now());
    const walked = walk.write(controller, 1, clock.now());
    assert.deepEqual(sortedWrite(first), sortedWrite(walked), "the first write is a walk of every key");
    assert.equal(first.keysVisited, KEYS + LEASED_KEYS);

    const incrementalMs: number[] = [];
    const walkMs: number[] = [];
    for (let round = 0; round < 5; round++) {
      await clock.advance(100);
      await ask("per_customer", `customer-${round * 7_919}`, 1);
      const { result: changes, ms } = cpuMs(() => {
        const changes = records.changes(controller, 1, clock.now());
        records.committed(changes, clock.now());
        return changes;
      });
      incrementalMs.push(ms);
      assert.equal(changes.keysVisited, 1, `round ${round}: looked at ${changes.keysVisited} keys`);
      // 50 when the keys were made, 0.1 more per 100 ms since, 1 taken now.
      const [written] = changes.throttlers;
      assert.equal(changes.throttlers.length, 1);
      assert.equal(written?.key, `customer-${round * 7_919}`);
      assert.ok(Math.abs((written?.balance?.balance ?? 0) - (49 + 0.1 * (round + 1))) < 1e-9, JSON.stringify(written));
      if (round < 2) {
        const timed = cpuMs(() => walk.write(controller, 1, clock.now()));
        walkMs.push(timed.ms);
        assert.deepEqual(sortedWrite(changes), sortedWrite(timed.result), `round ${round}: the walk writes the same`);
      }
    }
    const incremental = Math.min(...incrementalMs);
    const walked1 = Math.min(...walkMs);
    assert.ok(
      incremental <= walked1 * MAX_SHARE_OF_WALK,
      `one write after a grant on one key: ${incrementalMs.map((ms) => ms.toFixed(2)).join(", ")} ms of CPU; the walk of every key: ${walkMs.map((ms) => ms.toFixed(0)).join(", ")} ms`,
    );
    controller.close();
  });
});
