import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { ManualClock, QuotaBucket, QuotaBucketDriver, quotaBucketConfig, type Admission, type QuotaBucketConfig, type Settlement } from "../src/index.ts";
import { request } from "./quota-bucket-harness.ts";
import { seededRandom } from "./seeded-random.ts";

// QuotaBucket.submit(…, grantOnArrival) — the driver's path — grants a request that finds nobody
// waiting and quota at hand without the queue. It must grant exactly what submitting it to the queue
// and polling at the same instant grants: here two buckets take the same random operations in virtual
// time, one through each path, and must agree on every answer and every figure after each step.

/** Seeded draws, so a failure names a seed that reproduces it. */
function random(seed: number) {
  const next = seededRandom(seed);
  return { next, pick: <T>(items: readonly T[]): T => items[Math.floor(next() * items.length)] as T };
}

/** What a step answered: the request's own admission or settlement, then everything else settled, in order. */
type Outcome = { own: unknown; others: unknown[] };

/** The driver's sequence: submit, then a poll at the same instant unless the submit settled it. */
function viaArrival(admission: Admission, polled: () => Settlement[]): Outcome {
  const id = admission.requestId;
  if (admission.kind === "granted" || admission.kind === "refused") return { own: describe1(admission), others: [] };
  const settlements = polled();
  return { own: describe1(settlements.find((s) => s.requestId === id) ?? admission), others: settlements.filter((s) => s.requestId !== id).map(describe1) };
}

function describe1(settled: Admission | Settlement): unknown {
  if (settled.kind === "granted") return { kind: "granted", id: settled.requestId, amount: settled.amount, waitedMs: settled.waitedMs };
  if (settled.kind === "refused" || settled.kind === "timed_out") return { kind: settled.kind, id: settled.requestId, code: settled.error.code };
  return { kind: "waiting", id: settled.requestId };
}

const CONFIGS: Record<string, Partial<QuotaBucketConfig>> = {
  rate: { limit: 10, periodMs: 1_000 },
  "rate with classes": { limit: 10, periodMs: 1_000, classWeights: { gold: 3, silver: 1 } },
  "rate, max_grant_amount 2": { limit: 5, periodMs: 1_000, maxGrantAmount: 2 },
  concurrency: { kind: "concurrency", limit: 3, periodMs: 1_000 },
  unlimited: { limit: null },
  "small queue, short grace": { limit: 4, periodMs: 1_000, maxQueueSize: 3, detachedGraceMs: 200 },
};

describe("QuotaBucket: a request granted on arrival (the driver's path) is granted as the queue would grant it", () => {
  for (const [name, overrides] of Object.entries(CONFIGS)) {
    it(`${name}: same answers and figures over random operations (virtual time)`, () => {
      for (let seed = 1; seed <= 40; seed++) {
        const { next, pick } = random(seed * 7919);
        const fast = new QuotaBucket("api", quotaBucketConfig(overrides), 0);
        const queued = new QuotaBucket("api", quotaBucketConfig(overrides), 0);
        const ids = Array.from({ length: 12 }, (_, i) => `r${i}`);
        let now = 0;
        for (let step = 0; step < 150; step++) {
          const where = `seed ${seed}, step ${step}, t=${now}`;
          // Time passes; both buckets wake for what came due, as the driver's timer would.
          if (next() < 0.5) now += pick([0, 1, 7, 50, 100, 400]);
          assert.deepEqual(fast.poll(now).map(describe1), queued.poll(now).map(describe1), `${where}: wake-up`);
          const op = next();
          if (op < 0.6) {
            const id = next() < 0.1 ? "" : pick(ids);
            const req = request(id, pick([0, 1, 1, 1, 2, 3, 7]), {
              classId: pick(["", "", "gold", "silver", "nope"]),
              timestampMs: pick([0, 5, 10]),
              deadlineAt: next() < 0.3 ? now + pick([0, 10, 300]) : null,
            });
            const a = viaArrival(fast.submit(req, now, true), () => fast.poll(now));
            const b = viaArrival(queued.submit(req, now), () => queued.poll(now));
            assert.deepEqual(a, b, `${where}: submit ${JSON.stringify(req)}`);
          } else if (op < 0.7) {
            const amount = pick([1, 2]);
            fast.release(amount, "", now);
            queued.release(amount, "", now);
            assert.deepEqual(fast.poll(now).map(describe1), queued.poll(now).map(describe1), `${where}: release`);
          } else if (op < 0.8) {
            const id = pick(ids);
            const cancel = next() < 0.5;
            assert.equal(cancel ? fast.cancel(id, now) : fast.detach(id, now), cancel ? queued.cancel(id, now) : queued.detach(id, now), where);
            assert.deepEqual(fast.poll(now).map(describe1), queued.poll(now).map(describe1), `${where}: ${cancel ? "cancel" : "detach"}`);
          } else if (op < 0.85) {
            const amount = pick([1, 2]);
            assert.equal(fast.tryAcquire(amount, "", now), queued.tryAcquire(amount, "", now), `${where}: tryAcquire`);
          }
          assert.deepEqual(fast.snapshot(now), queued.snapshot(now), `${where}: snapshot`);
          assert.equal(fast.memory().rememberedRequestIds, queued.memory().rememberedRequestIds, `${where}: remembered ids`);
          // (Not nextWakeAt: the queued path leaves its granted request's deadline timer behind, a
          // wake-up that finds nothing; the other path never made one. Both are polled alike here.)
        }
      }
    });
  }

  it("through the driver: a grant at once is the Grant itself (no promise), and a retry of its id is answered from memory", async () => {
    const clock = new ManualClock(0);
    const driver = new QuotaBucketDriver("api", quotaBucketConfig({ limit: 2, periodMs: 1_000 }), clock);
    const first = driver.acquireNow({ amount: 1, requestId: "a" });
    assert.ok(!(first instanceof Promise));
    assert.deepEqual(first, { granted: 1, waitedMs: 0 });
    assert.deepEqual(driver.acquireNow({ amount: 1, requestId: "a" }), { granted: 1, waitedMs: 0 }, "replayed, not granted again");
    assert.ok(!(driver.acquireNow({ amount: 1, requestId: "b" }) instanceof Promise));
    // The balance is 0 now: a new request waits (for a positive balance, docs/design.md §9.1), as a promise.
    const waiting = driver.acquireNow({ amount: 1, requestId: "c" });
    assert.ok(waiting instanceof Promise);
    await clock.advance(1);
    assert.deepEqual(await waiting, { granted: 1, waitedMs: 1 });
    assert.equal(driver.snapshot().counters.granted, 3);
    assert.equal(driver.snapshot().counters.replayed, 1);
  });
});
