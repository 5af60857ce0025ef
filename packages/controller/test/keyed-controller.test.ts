import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { ManualClock, SluiceError } from "@sluice/core";
import type { CallContext } from "@sluice/protocol";
import { validateDynamicSpec } from "@sluice/spec";
import { PrometheusText } from "@sluice/status-http";
import { Controller, writeControllerMetrics } from "../src/index.ts";

// Keyed throttlers in the controller (docs/design.md §11.4), in virtual time: a bucket per key at its own
// limit, overrides changed live, idle keys that still owe, forgetting only what grants nothing, and
// max_keys refusing a new key at once.

/** `detachedGraceMs`: how long buckets remember granted request ids (a key is never forgotten sooner). */
function setup(throttler: Record<string, unknown>, options: { detachedGraceMs?: number } = {}) {
  const clock = new ManualClock(1_700_000_000_000);
  const parsed = validateDynamicSpec({ throttlers: { api: throttler } });
  assert.ok(parsed.ok, parsed.ok ? "" : JSON.stringify(parsed.issues));
  const controller = new Controller({ dynamicSpec: parsed.value, computations: [], clock, ...options });
  const keyed = () => {
    const t = controller.snapshot().throttlers.find((x) => x.id === "api");
    assert.ok(t?.keyed, "the throttler is reported as keyed");
    return t.keyed;
  };
  return { clock, controller, keyed };
}

const context = (): CallContext => ({ deadlineAt: null, signal: new AbortController().signal, metadata: {} });
const ask = (controller: Controller, key: string, amount = 1, clientId = "c") =>
  controller.requestQuota({ throttlerId: "api", clientId, amount, timestampMs: 0, quotaClassId: "", requestId: "", key }, context());

/** Asks for one unit after another on `key` until `stop()`; counts the units granted after `from`. */
function drive(controller: Controller, clock: ManualClock, key: string, from: number, stop: () => boolean) {
  const run = { granted: 0, done: Promise.resolve() };
  run.done = (async () => {
    while (!stop()) {
      const grant = await ask(controller, key);
      if (clock.now() >= from) run.granted += grant.granted;
    }
  })();
  return run;
}

describe("keyed throttler in the controller (virtual time)", () => {
  it("two keys of one throttler run at their own limits, the template's and an override's", async () => {
    const { clock, controller } = setup({ limit: 10, period: "1s", keyed: { overrides: { acme: { limit: 100 } } } });
    const start = clock.now();
    // The first second spends each bucket's start burst; the rate is counted over the 10 s after it.
    const from = start + 1_000;
    const end = from + 10_000;
    let stopped = false;
    const small = drive(controller, clock, "small", from, () => stopped);
    const acme = drive(controller, clock, "acme", from, () => stopped);
    await clock.advanceUntil(() => clock.now() >= end, 5, 20_000);
    stopped = true;
    await clock.advance(1_000);
    await Promise.all([small.done, acme.done]);
    // Virtual time: the bucket grants exactly limit × 10 s, give or take the unit in flight at each edge.
    assert.ok(Math.abs(small.granted - 100) <= 2, `small got ${small.granted} in 10 s at 10/s`);
    assert.ok(Math.abs(acme.granted - 1_000) <= 2, `acme got ${acme.granted} in 10 s at 100/s`);
    controller.close();
  });

  it("an override changed by a reconfiguration takes effect within one request_period", async () => {
    const { clock, controller } = setup({ limit: 10, period: "1s", request_period: "1s", keyed: { overrides: { acme: { limit: 10 } } } });
    let stopped = false;
    const t0 = clock.now();
    const before = drive(controller, clock, "acme", t0 + 1_000, () => stopped);
    await clock.advanceTo(t0 + 3_000);
    const atChange = before.granted;
    await controller.updateDynamicSpec(
      JSON.stringify({ throttlers: { api: { limit: 10, period: "1s", request_period: "1s", keyed: { overrides: { acme: { limit: 50 } } } } } }),
    );
    // From one request_period after the change on, the key runs at its new limit.
    await clock.advanceTo(t0 + 4_000);
    const settled = before.granted;
    await clock.advanceTo(t0 + 6_000);
    const rate = (before.granted - settled) / 2;
    stopped = true;
    await clock.advance(1_000);
    await before.done;
    assert.ok(Math.abs(atChange - 20) <= 2, `10/s before the change: ${atChange} in 2 s`);
    assert.ok(Math.abs(rate - 50) <= 1, `50/s within one request_period of the change: ${rate}/s`);
    controller.close();
  });

  it("a key in debt that goes idle past idle_timeout still pays its debt, parked or not", async () => {
    const { clock, controller, keyed } = setup({ limit: 1, period: "1s", keyed: { idle_timeout: "2s" } });
    // 200 units at once from a full bucket of 1: granted, and 199 owed at 1/s.
    await ask(controller, "debtor", 200);
    await clock.advance(70_000); // past idle_timeout and past parking
    assert.equal(keyed().keys, 1, "a key in debt is not forgotten");
    assert.equal(keyed().activeKeys, 0, "the quiet key is parked as its balance");
    let answered = false;
    const next = ask(controller, "debtor").then((grant) => {
      answered = true;
      return grant;
    });
    await clock.advance(128_000);
    assert.equal(answered, false, "still 1 unit owed 198 s after the grant");
    await clock.advance(2_000);
    const grant = await next;
    assert.ok(answered);
    assert.ok(grant.waitedMs >= 128_000 && grant.waitedMs <= 130_000, `waited ${grant.waitedMs} ms to pay the debt`);
    controller.close();
  });

  it("a key with a full bucket is forgotten after idle_timeout and the count drops; it comes back as new", async () => {
    const { clock, controller, keyed } = setup({ limit: 5, period: "1s", keyed: { idle_timeout: "3s" } }, { detachedGraceMs: 2_000 });
    await ask(controller, "a");
    await ask(controller, "b");
    assert.equal(keyed().keys, 2);
    await clock.advance(1_500);
    await ask(controller, "b"); // b stays busy
    await clock.advance(2_000);
    assert.equal(keyed().keys, 1, "a, full and idle for 3 s, is forgotten; b is not idle yet");
    assert.equal(keyed().forgottenKeys, 1);
    await clock.advance(3_000);
    assert.equal(keyed().keys, 0);
    assert.equal(keyed().forgottenKeys, 2);
    const grant = await ask(controller, "a", 5);
    assert.equal(grant.waitedMs, 0, "a forgotten key comes back with the full bucket it had");
    controller.close();
  });

  it("a full idle key is not forgotten while its bucket still remembers granted request ids", async () => {
    const { clock, controller, keyed } = setup({ limit: 5, period: "1s", keyed: { idle_timeout: "3s" } }, { detachedGraceMs: 20_000 });
    const first = await controller.requestQuota(
      { throttlerId: "api", clientId: "c", amount: 5, timestampMs: 0, quotaClassId: "", requestId: "lost-answer", key: "a" },
      context(),
    );
    assert.equal(first.granted, 5);
    await clock.advance(10_000);
    assert.equal(keyed().keys, 1, "full and idle past idle_timeout, but within the 20 s of request ids");
    const retry = await controller.requestQuota(
      { throttlerId: "api", clientId: "c", amount: 5, timestampMs: 0, quotaClassId: "", requestId: "lost-answer", key: "a" },
      context(),
    );
    assert.equal(retry.granted, 5);
    const next = await ask(controller, "a", 5);
    assert.equal(next.waitedMs, 0, "the retry was answered from its id, not granted again: the bucket was still full");
    await clock.advance(25_000);
    assert.equal(keyed().keys, 0, "forgotten once the ids are forgotten too");
    controller.close();
  });

  it("the 101st key of max_keys 100 is refused at once with TOO_MANY_KEYS and the figures; live keys keep working", async () => {
    const { controller, keyed } = setup({ limit: 10, keyed: { max_keys: 100 } });
    for (let i = 0; i < 100; i++) await ask(controller, `k${i}`);
    await assert.rejects(ask(controller, "k100"), (error: unknown) => {
      assert.ok(error instanceof SluiceError);
      assert.equal(error.code, "TOO_MANY_KEYS");
      assert.equal(error.retriable, false);
      assert.match(error.message, /keyed throttler "api" already holds 100 keys, its max_keys of 100; key "k100" is refused/);
      assert.deepEqual(error.details, { throttlerId: "api", key: "k100", keys: 100, maxKeys: 100 });
      return true;
    });
    await ask(controller, "k7");
    assert.equal(keyed().keys, 100);
    assert.equal(keyed().refusedKeys, 1);
    controller.close();
  });

  it("refuses a missing or too long key, and a key on a throttler that is not keyed, naming the throttler", async () => {
    const { controller } = setup({ limit: 10, keyed: {} });
    await assert.rejects(ask(controller, ""), { code: "INVALID_REQUEST", message: /throttler "api" is keyed: call it through forKey\(key\)/ });
    await assert.rejects(ask(controller, "x".repeat(257)), { code: "INVALID_REQUEST", message: /the key has 257 UTF-8 bytes .* more than the 256/ });
    controller.close();
    const plain = setup({ limit: 10 });
    await assert.rejects(ask(plain.controller, "acme"), { code: "INVALID_REQUEST", message: /throttler "api" is not keyed/ });
    plain.controller.close();
  });

  it("a keyed concurrency throttler leases per key; renewing the throttler renews every key of the client", async () => {
    const { clock, controller } = setup({ kind: "concurrency", limit: 2, lease_timeout: "2s", keyed: { overrides: { big: { limit: 3 } } } });
    await ask(controller, "a", 2);
    await ask(controller, "big", 3);
    let waiting = false;
    const third = ask(controller, "a", 1).then(() => (waiting = true));
    await clock.advance(1_500);
    const { held } = await controller.renewLeases({ clientId: "c", throttlerIds: ["api"] }, context());
    assert.equal(held, 5, "both keys' units are renewed");
    await clock.advance(1_000);
    assert.equal(waiting, false, "renewed: key a is still full");
    await controller.releaseQuota({ throttlerId: "api", clientId: "c", amount: 1, quotaClassId: "", key: "a" }, context());
    await third;
    controller.close();
  });

  it("/metrics: the key aggregates, and never more than top_keys series with a key label", async () => {
    const { clock, controller } = setup({ limit: 1, period: "1s", keyed: { top_keys: 2, idle_timeout: "20s", max_keys: 6 } }, { detachedGraceMs: 10_000 });
    // Five keys in debt by different amounts: each one's next unit waits in proportion.
    for (let i = 1; i <= 5; i++) await ask(controller, `k${i}`, 1 + i);
    const next = [1, 2, 3, 4, 5].map((i) => ask(controller, `k${i}`));
    await clock.advance(6_000);
    await Promise.all(next);
    await ask(controller, "k6");
    await assert.rejects(ask(controller, "k7"), { code: "TOO_MANY_KEYS" });
    const text = async () => {
      const out = new PrometheusText();
      writeControllerMetrics(out, controller.snapshot());
      return out.render();
    };
    const metrics = await text();
    const keySeries = metrics.split("\n").filter((line) => line.startsWith("sluice_controller_throttler_top_key_wait_ms{"));
    assert.deepEqual(
      keySeries.map((line) => /key="(k\d)"/.exec(line)?.[1]),
      ["k5", "k4"],
      `the two keys that waited most, most first:\n${keySeries.join("\n")}`,
    );
    assert.match(metrics, /^sluice_controller_throttler_keys\{throttler_id="api"\} 6$/m);
    assert.match(metrics, /^sluice_controller_throttler_refused_keys_total\{throttler_id="api"\} 1$/m);
    await clock.advance(30_000); // every bucket full again and idle past idle_timeout
    assert.match(await text(), /^sluice_controller_throttler_keys\{throttler_id="api"\} 0$/m);
    assert.match(await text(), /^sluice_controller_throttler_forgotten_keys_total\{throttler_id="api"\} 6$/m);
    controller.close();
  });

  it("top keys count waits that ended without a grant: a key whose every request times out is shown", async () => {
    const { clock, controller, keyed } = setup({ limit: 1, period: "1s", keyed: { top_keys: 2 } });
    await ask(controller, "starved", 30); // 29 units owed: nothing more for 29 s
    await ask(controller, "slow", 2); // 1 owed
    const deadlineAt = clock.now() + 2_000;
    // Each settles to its error (or null when granted), caught at once.
    const outcome = (deadline: number | null, signal: AbortSignal) =>
      controller
        .requestQuota(
          { throttlerId: "api", clientId: "c", amount: 1, timestampMs: 0, quotaClassId: "", requestId: "", key: "starved" },
          { deadlineAt: deadline, signal, metadata: {} },
        )
        .then(
          () => null,
          (error: unknown) => (error instanceof SluiceError ? error.code : String(error)),
        );
    const timingOut = [1, 2, 3].map(() => outcome(deadlineAt, new AbortController().signal));
    const cancel = new AbortController();
    const cancelled = outcome(null, cancel.signal);
    const slow = ask(controller, "slow");
    await clock.advance(2_000);
    assert.deepEqual(await Promise.all(timingOut), ["QUOTA_TIMEOUT", "QUOTA_TIMEOUT", "QUOTA_TIMEOUT"]);
    cancel.abort();
    assert.notEqual(await cancelled, null, "the cancelled request was not granted");
    assert.ok((await slow).waitedMs >= 1_000);
    const top = keyed().topKeys;
    assert.deepEqual(
      top.map((k) => k.key),
      ["starved", "slow"],
      `"starved" waited 4 × 2 s and was never granted: ${JSON.stringify(top)}`,
    );
    assert.ok(Math.abs((top[0]?.waitedMs ?? 0) - 8_000) <= 50, JSON.stringify(top));
    controller.close();
  });

  it("top keys count each millisecond of a request once: a timeout that keeps its place, its retry, a re-answer", async () => {
    const { clock, controller, keyed } = setup({ limit: 1, period: "1s", keyed: { top_keys: 1 } });
    await ask(controller, "debtor", 30); // 29 units owed: the next unit is granted 29 s from now
    const start = clock.now();
    const again = (deadlineAt: number | null) =>
      controller.requestQuota(
        { throttlerId: "api", clientId: "c", amount: 1, timestampMs: 0, quotaClassId: "", requestId: "r-1", key: "debtor" },
        { deadlineAt, signal: new AbortController().signal, metadata: {} },
      );
    const first = again(start + 2_000).then(
      () => null,
      (error: unknown) => (error instanceof SluiceError ? error.code : String(error)),
    );
    await clock.advance(2_000);
    assert.equal(await first, "QUOTA_TIMEOUT", "the first attempt timed out; its request keeps its place in the queue");
    assert.equal(keyed().topKeys[0]?.waitedMs, 2_000, "the 2 s of the timed-out attempt are counted");
    await clock.advance(1_000); // nobody waits on the request for 1 s
    const retry = again(null);
    await clock.advanceUntil(() => clock.now() >= start + 30_000, 100, 30_000);
    const grant = await retry;
    // The bucket's figure is the request's whole wait since its first arrival, the 2 s and the gap included.
    assert.ok(grant.waitedMs >= 29_000 && grant.waitedMs <= 29_100, `granted after ${grant.waitedMs} ms`);
    const waited = () => keyed().topKeys[0]?.waitedMs ?? 0;
    // Counted once: the first attempt's 2 s, then the retry's own wait from 3 s to the grant.
    const expected = 2_000 + (grant.waitedMs - 3_000);
    assert.equal(waited(), expected, `the 2 s of the first attempt were counted again: ${waited()} ms, not ${expected}`);
    // The answer lost: the same id again is answered from the bucket's memory at once, nothing more waited.
    const reanswer = await again(null);
    assert.equal(reanswer.waitedMs, grant.waitedMs, "answered from the request id");
    assert.equal(waited(), expected, `a re-answer counted the wait again: ${waited()} ms, not ${expected}`);
    controller.close();
  });

  it("a key's balance taken from one controller and restored on another keeps its debt (the failover hand-over)", async () => {
    const first = setup({ limit: 1, period: "1s", keyed: {} });
    await ask(first.controller, "debtor", 30); // 29 units owed at 1/s
    await ask(first.controller, "fresh");
    const balances = first.controller.keyedBalances().get("api");
    assert.ok(balances);
    const debtor = balances.get("debtor");
    assert.ok(debtor && debtor.balance < -28, `persisted balance ${debtor?.balance}`);
    first.controller.close();

    const second = setup({ limit: 1, period: "1s", keyed: {} });
    await second.clock.advanceTo(debtor.atMs + 5_000); // the successor takes over 5 s later
    for (const [key, { balance, atMs }] of balances) assert.ok(second.controller.restoreKeyedBalance("api", key, balance, atMs));
    assert.equal(second.keyed().keys, 2);
    const fresh = await ask(second.controller, "fresh");
    assert.equal(fresh.waitedMs, 0, "a key without debt is served at once");
    let answered = false;
    const next = ask(second.controller, "debtor").then((grant) => {
      answered = true;
      return grant;
    });
    await second.clock.advance(23_000);
    assert.equal(answered, false, "still in debt 28 s after the grant, on the successor");
    await second.clock.advance(2_000);
    const grant = await next;
    assert.ok(grant.waitedMs >= 23_000 && grant.waitedMs <= 25_000, `waited ${grant.waitedMs} ms on the successor`);
    second.controller.close();
  });
});
