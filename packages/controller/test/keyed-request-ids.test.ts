import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { ManualClock, SluiceError } from "@sluice/core";
import type { CallContext } from "@sluice/protocol";
import { validateDynamicSpec } from "@sluice/spec";
import { Controller } from "../src/index.ts";

// Granted request ids of a keyed throttler (docs/design.md §11.4, docs/internals/request-ids.md), in
// virtual time: one memory for all the throttler's keys, in which an id counts per key; a retry
// within the grace is answered with its grant and never granted twice, whether its key's bucket is
// active, parked or forgotten meanwhile; after the grace it is a new request.

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
const ask = (controller: Controller, key: string, amount: number, requestId = "") =>
  controller.requestQuota({ throttlerId: "api", clientId: "c", amount, timestampMs: 0, quotaClassId: "", requestId, key }, context());

/** How long one more unit on `key` waits (0 when its bucket has quota at hand). */
async function waitForOne(controller: Controller, clock: ManualClock, key: string): Promise<number> {
  let waited: number | null = null;
  void ask(controller, key, 1).then((grant) => {
    waited = grant.waitedMs;
  });
  await clock.advanceUntil(() => waited !== null, 10, 100_000);
  return waited ?? Number.NaN;
}

describe("keyed throttler: granted request ids (virtual time)", () => {
  it("an id counts per key: the same id on two keys is two grants, and a retry on one is answered, not granted again", async () => {
    const { clock, controller } = setup({ limit: 5, period: "1s", keyed: {} });
    const a = await ask(controller, "a", 5, "same");
    const b = await ask(controller, "b", 5, "same");
    assert.deepEqual([a.granted, a.waitedMs, b.granted, b.waitedMs], [5, 0, 5, 0], "each key grants from its own full bucket");
    await clock.advance(100);
    const retry = await ask(controller, "a", 5, "same");
    assert.deepEqual([retry.granted, retry.waitedMs], [5, 0], "the retry gets the grant it was answered with");
    // a took its 5 once, and 0.5 came back in the 100 ms: a positive balance grants the next unit at
    // once (granted again, the retry would have left a debt of 4.5, about a second's wait).
    assert.equal(await waitForOne(controller, clock, "a"), 0, "a's bucket was not charged for the retry");
    await assert.rejects(ask(controller, "b", 3, "same"), (error: unknown) => error instanceof SluiceError && error.code === "INVALID_REQUEST");
    const other = await ask(controller, "c", 3, "same");
    assert.equal(other.granted, 3, "another key's request with that id and another amount is its own");
    controller.close();
  });

  it("a request granted after a wait is answered again when retried after its key was parked, until its grace ends", async () => {
    const { clock, controller, keyed } = setup({ limit: 1, period: "1s", keyed: { idle_timeout: "10m" } }, { detachedGraceMs: 60_000 });
    const t0 = clock.now();
    await ask(controller, "k", 20, "debt"); // granted at once from a full bucket of 1: 19 owed
    let granted: { granted: number; waitedMs: number } | null = null;
    void ask(controller, "k", 1, "waited").then((grant) => {
      granted = grant;
    });
    await clock.advanceUntil(() => granted !== null, 10, 60_000);
    const first = granted as unknown as { granted: number; waitedMs: number };
    assert.ok(first.waitedMs >= 19_000 && first.waitedMs <= 20_100, `the request waited ${first.waitedMs} ms for the debt`);
    // Its last request came at t0: the key is parked a minute later (its bucket full again, nothing
    // held), while "waited" is still within the grace of its grant (t0 + ~20 s + 60 s).
    await clock.advanceTo(t0 + 70_000);
    assert.equal(keyed().activeKeys, 0, "the quiet key is parked");
    assert.equal(keyed().keys, 1);
    const retry = await ask(controller, "k", 1, "waited");
    assert.deepEqual([retry.granted, retry.waitedMs], [first.granted, first.waitedMs], "answered with its grant, not granted again");
    assert.equal(await waitForOne(controller, clock, "k"), 0, "the key came back with its full bucket, not charged for the retry");
    // Past the grace of "waited", an id is new again: granted from the bucket (1 unit per second now).
    await clock.advanceTo(t0 + first.waitedMs + 61_000);
    const late = await ask(controller, "k", 1, "waited");
    assert.equal(late.granted, 1);
    assert.equal(late.waitedMs, 0, "a new request, granted at once from the full bucket");
    assert.equal((await waitForOne(controller, clock, "k")) > 0, true, "and it took the unit it was granted");
    controller.close();
  });

  it("a retry after the key was forgotten is answered with its grant, and the key comes back as it was", async () => {
    const { clock, controller, keyed } = setup({ limit: 2, period: "1s", keyed: { idle_timeout: "3s" } }, { detachedGraceMs: 4_000 });
    const t0 = clock.now();
    await ask(controller, "f", 30, "big"); // 28 owed: the bucket is full again only after 14 s
    let waited: { granted: number; waitedMs: number } | null = null;
    void ask(controller, "f", 2, "queued").then((grant) => {
      waited = grant;
    });
    await clock.advanceUntil(() => waited !== null, 10, 60_000);
    const first = waited as unknown as { granted: number; waitedMs: number };
    assert.ok(first.waitedMs >= 14_000, `queued behind the debt for ${first.waitedMs} ms`);
    // Full again about 2 s after that grant (it left a debt of about 2), idle past idle_timeout and
    // the grace since its last request (t0): forgotten at the next sweep, with "queued" still within
    // the grace of its grant.
    await clock.advanceTo(t0 + first.waitedMs + 3_500);
    assert.equal(keyed().keys, 0, "the full, idle key is forgotten");
    const retry = await ask(controller, "f", 2, "queued");
    assert.deepEqual([retry.granted, retry.waitedMs], [2, first.waitedMs], "answered from the throttler's memory of ids");
    assert.equal(await waitForOne(controller, clock, "f"), 0, "the key is back with its full bucket of 2");
    controller.close();
  });

  it("the throttler's memory is bounded: 100 × max_queue_size ids per key in use (up to 1,000,000), over all its keys", async () => {
    const { controller } = setup({ limit: 1_000, period: "1s", max_queue_size: 2, keyed: {} });
    const balanceOf = (key: string) => controller.snapshot({ throttlerId: "api", key }).throttlers[0]?.keyed?.key?.balance;
    // 700 ids of one unit over 3 keys in use, in a frozen instant (nothing accrues): the throttler
    // keeps the latest 3 × 200 = 600, whichever keys they were granted on.
    for (let i = 0; i < 700; i++) await ask(controller, `key-${i % 3}`, 1, `id-${i}`);
    const before = ["key-0", "key-1", "key-2"].map(balanceOf);
    assert.deepEqual(before, [1_000 - 234, 1_000 - 233, 1_000 - 233]);
    await ask(controller, "key-0", 1, "id-699");
    await ask(controller, "key-1", 1, "id-100");
    assert.equal(balanceOf("key-0"), before[0], "id-699 is remembered: answered, not granted again");
    assert.equal(balanceOf("key-1"), before[1], "id-100, the oldest of the latest 600, too");
    await ask(controller, "key-0", 1, "id-0");
    assert.equal(balanceOf("key-0"), (before[0] ?? 0) - 1, "id-0 was forgotten early (past the bound): a new request, granted again");
    controller.close();
  });

  it("a key's max_queue_size bounds its own ids: many busy keys do not push each other's out before the grace", async () => {
    // 100 × max_queue_size = 1,000 ids is one key's share; 100 keys in use keep 100 times that.
    const { clock, controller } = setup({ limit: 100_000, period: "1s", max_queue_size: 10, keyed: {} }, { detachedGraceMs: 60_000 });
    await ask(controller, "k0", 1, "first");
    for (let i = 0; i < 5_000; i++) await ask(controller, `k${1 + (i % 100)}`, 1, `other-${i}`);
    await clock.advance(1_000);
    await assert.rejects(
      ask(controller, "k0", 2, "first"),
      (error: unknown) => error instanceof SluiceError && error.code === "INVALID_REQUEST",
      "a retry with another amount is refused: the id is still remembered",
    );
    const retry = await ask(controller, "k0", 1, "first");
    assert.deepEqual([retry.granted, retry.waitedMs], [1, 0], "the retry is answered with its grant");
    controller.close();
  });
});
