import assert from "node:assert/strict";
import { describe, it } from "node:test";
import fc from "fast-check";
import { QuotaBucket, quotaBucketConfig } from "../src/index.ts";

/** Random operations on one bucket, in virtual time. */
type Op =
  | { kind: "submit"; amount: number; classId: string; timestampMs: number; deadlineInMs: number | null; reuseId: boolean }
  | { kind: "advance"; ms: number }
  | { kind: "cancel"; pick: number }
  | { kind: "detach"; pick: number }
  | { kind: "reconfigure"; limit: number; maxGrant: number | null; weightA: number };

const op: fc.Arbitrary<Op> = fc.oneof(
  {
    weight: 5,
    arbitrary: fc.record({
      kind: fc.constant("submit" as const),
      amount: fc.oneof(fc.integer({ min: 0, max: 50 }), fc.double({ min: 0, max: 200, noNaN: true })),
      classId: fc.constantFrom("", "a", "b", "unknown", "default"),
      timestampMs: fc.integer({ min: 0, max: 1000 }),
      deadlineInMs: fc.option(fc.integer({ min: 1, max: 5000 }), { nil: null }),
      reuseId: fc.boolean(),
    }),
  },
  { weight: 4, arbitrary: fc.record({ kind: fc.constant("advance" as const), ms: fc.integer({ min: 0, max: 3000 }) }) },
  { weight: 1, arbitrary: fc.record({ kind: fc.constant("cancel" as const), pick: fc.nat() }) },
  { weight: 1, arbitrary: fc.record({ kind: fc.constant("detach" as const), pick: fc.nat() }) },
  {
    weight: 1,
    arbitrary: fc.record({
      kind: fc.constant("reconfigure" as const),
      limit: fc.integer({ min: 1, max: 100 }),
      maxGrant: fc.option(fc.integer({ min: 1, max: 20 }), { nil: null }),
      weightA: fc.double({ min: 0.1, max: 10, noNaN: true }),
    }),
  },
);

describe("QuotaBucket properties", () => {
  it("never grants more than capacity + limit × elapsed + one request's overdraft, never twice, and refunds exactly", () => {
    fc.assert(
      fc.property(fc.integer({ min: 1, max: 100 }), fc.integer({ min: 100, max: 5000 }), fc.array(op, { maxLength: 120 }), (limit0, periodMs, ops) => {
        let now = 0;
        let limit = limit0;
        const bucket = new QuotaBucket("p", quotaBucketConfig({ limit, periodMs, classWeights: { a: 2, b: 1 } }), now);
        // Upper bound of what the bucket may have handed out: it starts full, refills at most at
        // the highest limit seen, and may overdraw by one request (pay-after).
        let budget = (limit * periodMs) / 1000;
        let largestAmount = 0;
        const grantedIds = new Set<string>();
        let settledAmount = 0;
        const live: string[] = [];
        let seq = 0;

        const settle = () => {
          for (const s of bucket.poll(now)) {
            if (s.kind === "granted") {
              assert.ok(!grantedIds.has(s.requestId), `request ${s.requestId} granted twice`);
              grantedIds.add(s.requestId);
              settledAmount += s.amount;
            }
          }
        };

        for (const o of ops) {
          if (o.kind === "submit") {
            const id = o.reuseId && live.length > 0 ? (live[seq % live.length] ?? "x") : `r${seq}`;
            seq += 1;
            const admission = bucket.submit(
              {
                requestId: id,
                clientId: "c",
                amount: o.amount,
                timestampMs: o.timestampMs,
                classId: o.classId,
                deadlineAt: o.deadlineInMs === null ? null : now + o.deadlineInMs,
              },
              now,
            );
            if (admission.kind === "queued") {
              live.push(id);
              largestAmount = Math.max(largestAmount, o.amount);
            }
            if (admission.kind === "granted" && admission.amount > 0) {
              assert.ok(grantedIds.has(id), "an immediate non-zero grant is only ever a replay");
            }
          } else if (o.kind === "advance") {
            // step through every wake-up in between, as the driver would
            const until = now + o.ms;
            for (let next = bucket.nextWakeAt(now); next !== null && next <= until; next = bucket.nextWakeAt(now)) {
              budget += ((next - now) * limit) / 1000;
              now = next;
              settle();
            }
            budget += ((until - now) * limit) / 1000;
            now = until;
          } else if (o.kind === "cancel" || o.kind === "detach") {
            const id = live[o.pick % Math.max(1, live.length)];
            if (id !== undefined) {
              if (o.kind === "cancel") bucket.cancel(id, now);
              else bucket.detach(id, now);
            }
          } else {
            limit = Math.max(limit, o.limit);
            bucket.reconfigure(quotaBucketConfig({ limit: o.limit, periodMs, maxGrantAmount: o.maxGrant, classWeights: { a: o.weightA, b: 1 } }), now);
            budget += (o.limit * periodMs) / 1000; // a larger capacity may let the balance refill higher
          }
          settle();
          const snapshot = bucket.snapshot(now);
          const net = snapshot.counters.granted - snapshot.counters.refunded;
          assert.ok(net <= budget + largestAmount + 1e-6, `net granted ${net} exceeds ${budget} + overdraft ${largestAmount}`);
          assert.ok((snapshot.balance ?? 0) <= (snapshot.capacity ?? 0) + 1e-9, "balance never above capacity");
          assert.ok(snapshot.pendingRequests >= 0 && snapshot.pendingAmount >= -1e-6, "pending counts never go negative");
          // Every refund matches a grant: what is out net of refunds is what settled requests got,
          // plus partial chunks of requests still waiting.
          assert.ok(net + 1e-6 >= settledAmount, `net ${net} below settled ${settledAmount}`);
        }
        // Cancel everything still waiting: then net granted equals exactly what settled requests got.
        for (const id of live) bucket.cancel(id, now);
        const final = bucket.snapshot(now);
        assert.ok(Math.abs(final.counters.granted - final.counters.refunded - settledAmount) < 1e-6, "refunds match grants exactly");
        assert.equal(final.pendingRequests, 0);
      }),
      { numRuns: 300 },
    );
  });
});
