import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { GRANT_CHUNKS_PER_POLL, QuotaBucketDriver, REQUEST_IDS_PER_QUEUE_SLOT, isSluiceError, quotaBucketConfig, systemClock } from "../src/index.ts";
import { granted, makeBucket, request, runUntil } from "./quota-bucket-harness.ts";

// Defects a review of main found in QuotaBucket (issue 9); each test failed before its fix.

describe("QuotaBucket: a new request with nothing queued needs a positive balance (docs/design.md §9.1)", () => {
  it("waits at a balance of exactly 0, and is granted as soon as the balance is positive", () => {
    const bucket = makeBucket({ limit: 10, periodMs: 1000 });
    bucket.submit(request("all", 10), 0);
    assert.deepEqual(granted(bucket.poll(0)), ["all"]);
    assert.equal(bucket.snapshot(0).balance, 0);
    bucket.submit(request("next", 1), 0);
    assert.deepEqual(bucket.poll(0), [], "not granted at balance 0 with nothing queued");
    assert.equal(bucket.nextWakeAt(0), 1, "wakes when the refill has made the balance positive");
    assert.deepEqual(granted(bucket.poll(1)), ["next"]);
  });

  it("one that arrives during a debt waits like a queued request: granted as soon as the balance is 0", () => {
    const bucket = makeBucket({ limit: 10, periodMs: 1000 });
    bucket.submit(request("overdraw", 12), 0);
    bucket.poll(0); // balance 10 − 12 = −2
    bucket.submit(request("after", 1), 0);
    assert.equal(bucket.nextWakeAt(0), 200, "the debt of 2 is paid in 200 ms at 10/s");
    assert.deepEqual(granted(bucket.poll(200)), ["after"]);
  });

  it("grants queued requests at a balance of exactly 0 (pay-after), and later chunks of a started one", () => {
    const bucket = makeBucket({ limit: 10, periodMs: 1000, maxGrantAmount: 10 });
    bucket.submit(request("big", 20), 0); // first chunk at 10 → 0, second at 0: it is queued by then
    bucket.submit(request("queued", 1), 0);
    bucket.poll(0);
    assert.equal(bucket.snapshot(0).counters.granted, 20);
  });
});

describe("QuotaBucket: request ids", () => {
  it("a client id that looks like an anonymous key does not join the anonymous request", () => {
    const bucket = makeBucket({ limit: 0 });
    const anonymous = bucket.submit(request("", 5), 0);
    const client = bucket.submit(request("~0", 7), 0);
    assert.equal(anonymous.kind, "queued");
    assert.equal(client.kind, "queued", "a separate request, not joined to the anonymous one");
    assert.notEqual(client.requestId, anonymous.requestId);
    bucket.reconfigure(quotaBucketConfig({ limit: null }), 1);
    const settlements = bucket.poll(1);
    const amounts = new Map(settlements.map((s) => [s.requestId, s.kind === "granted" ? s.amount : -1]));
    assert.equal(amounts.get(anonymous.requestId), 5);
    assert.equal(amounts.get(client.requestId), 7, "answered with its own amount");
    assert.equal(bucket.snapshot(1).counters.granted, 12);
    // and a retry of "~0" is recognised as itself
    assert.deepEqual(bucket.submit(request("~0", 7), 2), { kind: "granted", requestId: client.requestId, amount: 7, waitedMs: 1 });
  });

  it("remembers granted ids for their whole grace at any grant rate (not only max_queue_size of them)", () => {
    const bucket = makeBucket({ limit: null, maxQueueSize: 10, detachedGraceMs: 60_000 });
    for (let i = 0; i < 500; i++) {
      bucket.submit(request(`r${i}`, 1), i);
      bucket.poll(i);
    }
    for (let i = 0; i < 500; i++) {
      const retry = bucket.submit(request(`r${i}`, 1), 1000);
      assert.equal(retry.kind, "granted", `retry of r${i}`);
    }
    const snapshot = bucket.snapshot(1000);
    assert.equal(snapshot.counters.granted, 500, "no retry was granted again");
    assert.equal(snapshot.counters.replayed, 500);
  });

  it("bounds remembered ids by forgetting the oldest early, never by refusing a new request (virtual time)", () => {
    const bound = 10 * REQUEST_IDS_PER_QUEUE_SLOT;
    const bucket = makeBucket({ limit: null, maxQueueSize: 10, detachedGraceMs: 60_000 });
    for (let i = 0; i < bound; i++) {
      assert.equal(bucket.submit(request(`r${i}`, 1), i).kind, "queued");
      assert.equal(granted(bucket.poll(i)).length, 1);
    }
    assert.equal(bucket.memory().rememberedRequestIds, bound);
    assert.equal(bucket.memory().maxRequestIds, bound);
    // At the bound, within the grace: a retry is still answered from memory...
    assert.equal(bucket.submit(request("r0", 1), bound).kind, "granted");
    assert.equal(bucket.snapshot(bound).counters.replayed, 1);
    // ...and a new id is granted (never QUEUE_FULL), the oldest id forgotten to make room.
    assert.equal(bucket.submit(request("one-more", 1), bound).kind, "queued");
    assert.equal(granted(bucket.poll(bound)).length, 1);
    assert.equal(bucket.memory().rememberedRequestIds, bound);
    assert.equal(bucket.memory().forgottenEarlyRequestIds, 1);
    // The price, stated in docs/internals/request-ids.md: a retry of a forgotten id is a new request, granted again.
    assert.equal(bucket.submit(request("r0", 1), bound + 1).kind, "queued");
    assert.equal(granted(bucket.poll(bound + 1)).length, 1);
    assert.equal(bucket.snapshot(bound + 1).counters.granted, bound + 2, "r0 granted twice, one-more once");
    assert.equal(bucket.memory().forgottenEarlyRequestIds, 2, "r1 made room for r0");
    // Ids not yet pushed out are still answered, not granted again.
    assert.equal(bucket.submit(request("r2", 1), bound + 2).kind, "granted");
    assert.equal(bucket.snapshot(bound + 2).counters.granted, bound + 2);
    // Requests without an id remember nothing and push nothing out.
    assert.equal(bucket.submit(request("", 1), bound + 2).kind, "queued");
    assert.equal(granted(bucket.poll(bound + 2)).length, 1);
    assert.equal(bucket.memory().forgottenEarlyRequestIds, 2);
    // Once the grace has passed, everything is forgotten in time, nothing early.
    bucket.poll(60_000 + bound + 2);
    assert.equal(bucket.memory().rememberedRequestIds, 0);
    assert.equal(bucket.memory().forgottenEarlyRequestIds, 2);
  });
});

describe("QuotaBucket: max_queue_size is a hard bound", () => {
  it("refuses to re-attach a detached request while the queue is full; it keeps its place for later", () => {
    const bucket = makeBucket({ limit: 0, maxQueueSize: 2, detachedGraceMs: 10_000 });
    bucket.submit(request("a", 1, { deadlineAt: 100 }), 0);
    bucket.submit(request("b", 1), 0);
    assert.deepEqual(
      runUntil(bucket, 0, 100).settlements.map((s) => s.kind),
      ["timed_out"],
    );
    assert.equal(bucket.submit(request("c", 1), 100).kind, "queued");
    const retry = bucket.submit(request("a", 1), 200);
    assert.equal(retry.kind, "refused");
    if (retry.kind === "refused") assert.match(retry.error.message, /has 2 requests waiting \(max_queue_size 2\)/);
    assert.equal(bucket.snapshot(200).pendingRequests, 2);
    assert.equal(bucket.snapshot(200).detachedRequests, 1, "still detached, still holding its place");
    bucket.cancel("c", 300);
    assert.equal(bucket.submit(request("a", 1), 300).kind, "reattached");
  });
});

describe("QuotaBucket: memory follows the live requests", () => {
  it("one blocked request and 100,000 cancels behind it leave a bounded number of entries", () => {
    const bucket = makeBucket({ limit: 0 });
    bucket.submit(request("blocked", 1), 0);
    for (let i = 0; i < 100_000; i++) {
      bucket.submit(request(`c${i}`, 1, { deadlineAt: 60_000 }), i / 100);
      bucket.cancel(`c${i}`, i / 100);
    }
    const memory = bucket.memory();
    assert.equal(memory.requests, 1);
    assert.ok(memory.queueEntries <= 2 * 1 + 64 + 1, `class queues hold ${memory.queueEntries} entries for 1 live request`);
    assert.ok(memory.timers <= 2 * 1 + 1024 + 1, `${memory.timers} timers for 1 live request`);
    assert.equal(bucket.snapshot(1000).pendingRequests, 1);
    // the survivor is still served first once quota comes
    bucket.reconfigure(quotaBucketConfig({ limit: null }), 1000);
    assert.deepEqual(granted(bucket.poll(1000)), ["blocked"]);
  });
});

describe("QuotaBucket: the grant loop", () => {
  it("grants at most GRANT_CHUNKS_PER_POLL chunks per poll and asks to be polled again at once", () => {
    const amount = 2 * GRANT_CHUNKS_PER_POLL + 100;
    const bucket = makeBucket({ limit: null, maxGrantAmount: 1 });
    bucket.submit(request("many-chunks", amount), 0);
    assert.deepEqual(bucket.poll(0), []);
    assert.equal(bucket.snapshot(0).counters.granted, GRANT_CHUNKS_PER_POLL);
    assert.equal(bucket.nextWakeAt(0), 0, "more is due now");
    assert.deepEqual(bucket.poll(0), []);
    assert.deepEqual(granted(bucket.poll(0)), ["many-chunks"]);
    assert.equal(bucket.snapshot(0).counters.granted, amount);
  });

  it("a chunk below the rounding step of what remains still makes progress", () => {
    const amount = 2 ** 52; // 2^52 − 0.1 rounds back to 2^52
    const bucket = makeBucket({ limit: null, maxGrantAmount: 0.1 });
    bucket.submit(request("huge", amount), 0);
    bucket.poll(0);
    const after = bucket.snapshot(0);
    assert.ok(after.counters.granted > 0);
    assert.ok(after.pendingAmount < amount, `pending amount ${after.pendingAmount} did not go down`);
  });

  it("the driver yields to the event loop between turns of a long grant", async () => {
    const driver = new QuotaBucketDriver("api", quotaBucketConfig({ limit: null, maxGrantAmount: 1 }), systemClock);
    let turns = 0;
    let stop = false;
    const tick = () => {
      turns += 1;
      if (!stop) setImmediate(tick);
    };
    setImmediate(tick);
    const grant = await driver.acquire({ amount: 5 * GRANT_CHUNKS_PER_POLL });
    stop = true;
    assert.equal(grant.granted, 5 * GRANT_CHUNKS_PER_POLL);
    assert.ok(turns >= 2, `the event loop ran ${turns} times while 5 turns of chunks were granted`);
    const refused = driver.acquire({ amount: -1 });
    await assert.rejects(refused, (e: unknown) => isSluiceError(e, "INVALID_AMOUNT"));
  });
});
