// LagOrderHeap against the generic MinHeap with the same comparator: the same items come out in the
// same order under any mix of pushes, pops and retains (fast-check, fixed seed).
import assert from "node:assert/strict";
import { test } from "node:test";
import fc from "fast-check";
import { LagOrderHeap } from "../src/lag-order-heap.ts";
import { MinHeap } from "../src/min-heap.ts";

interface Item {
  readonly timestampMs: number;
  readonly seq: number;
  alive: boolean;
}

const before = (a: Item, b: Item) => a.timestampMs < b.timestampMs || (a.timestampMs === b.timestampMs && a.seq < b.seq);

type Op = { kind: "push"; timestampMs: number } | { kind: "pop" } | { kind: "retain"; every: number };

const op: fc.Arbitrary<Op> = fc.oneof(
  {
    weight: 5,
    arbitrary: fc.record({
      kind: fc.constant("push" as const),
      timestampMs: fc.oneof(fc.integer({ min: 0, max: 20 }), fc.double({ min: 0, max: 2e12, noNaN: true })),
    }),
  },
  { weight: 3, arbitrary: fc.record({ kind: fc.constant("pop" as const) }) },
  { weight: 1, arbitrary: fc.record({ kind: fc.constant("retain" as const), every: fc.integer({ min: 2, max: 4 }) }) },
);

test("pops in the same order as MinHeap by (timestampMs, seq), through pushes, pops and retains", () => {
  fc.assert(
    fc.property(fc.array(op, { maxLength: 400 }), (ops) => {
      const fast = new LagOrderHeap<Item>();
      const plain = new MinHeap<Item>(before);
      let seq = 0;
      for (const step of ops) {
        if (step.kind === "push") {
          const item = { timestampMs: step.timestampMs, seq: seq++, alive: true };
          fast.push(item);
          plain.push(item);
        } else if (step.kind === "pop") {
          assert.equal(fast.pop(), plain.pop());
        } else {
          // Drop every `every`-th item by seq, in both, and check the same ones were dropped.
          const droppedFast: Item[] = [];
          const droppedPlain: Item[] = [];
          fast.retain(
            (item) => item.seq % step.every !== 0,
            (item) => droppedFast.push(item),
          );
          plain.retain(
            (item) => item.seq % step.every !== 0,
            (item) => droppedPlain.push(item),
          );
          assert.deepEqual(new Set(droppedFast), new Set(droppedPlain));
        }
        assert.equal(fast.size, plain.size);
        assert.equal(fast.peek(), plain.peek());
      }
      while (plain.size > 0) assert.equal(fast.pop(), plain.pop());
      assert.equal(fast.pop(), undefined);
    }),
    { seed: 14, numRuns: 300 },
  );
});

test("grows past its initial key arrays and gives them back after a retain drops most items", () => {
  const heap = new LagOrderHeap<Item>();
  for (let i = 0; i < 10_000; i++) heap.push({ timestampMs: (i * 7919) % 10_007, seq: i, alive: true });
  heap.retain((item) => item.seq < 100);
  let previous = -1;
  for (let item = heap.pop(); item; item = heap.pop()) {
    assert.ok(item.seq < 100);
    assert.ok(item.timestampMs >= previous);
    previous = item.timestampMs;
  }
});
