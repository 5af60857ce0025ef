// An adaptive keyed throttler (docs/design.md §11.3, §11.4), in virtual time with a load source the test
// sets: the template's one control loop moves the limit of every key (an override cannot set one),
// and sees the keys' use — that of the busiest key, in the units of the limit it moves. A key kept
// busy is demand, and the limit climbs; many keys each using little are no demand, however many
// (their sum would let every key's limit climb far above what any key uses). A concurrency template
// sees the units the busiest key has in use.
import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { ManualClock } from "@sluice/core";
import type { CallContext } from "@sluice/protocol";
import { validateDynamicSpec } from "@sluice/spec";
import { Controller, type LoadSource } from "../src/index.ts";

function setup(keyed: Record<string, unknown> = {}, kind = "rate") {
  const clock = new ManualClock(1_700_000_000_000);
  const source: LoadSource = { description: "test load", read: async () => ({ ok: true, load: 0.2 }) };
  const adaptive = { load: { module: "./unused.ts" }, target: { low: 0.9, high: 0.95 }, initial_limit: 4, min_limit: 1, max_limit: 100, interval: "1s" };
  const throttler = kind === "concurrency" ? { kind, adaptive, keyed } : { period: "1s", adaptive, keyed };
  const parsed = validateDynamicSpec({ throttlers: { api: throttler } });
  assert.ok(parsed.ok, parsed.ok ? "" : JSON.stringify(parsed.issues));
  const lines: string[] = [];
  const controller = new Controller({ dynamicSpec: parsed.value, computations: [], clock, log: (line) => lines.push(line), loadSourceOf: () => source });
  const api = () => {
    const t = controller.snapshot().throttlers.find((x) => x.id === "api");
    assert.ok(t?.adaptive);
    return t;
  };
  return { clock, controller, lines, api };
}

const context = (signal: AbortSignal): CallContext => ({ deadlineAt: null, signal, metadata: {} });
const ask = (controller: Controller, key: string, signal: AbortSignal) =>
  controller.requestQuota({ throttlerId: "api", clientId: "c", amount: 1, timestampMs: 0, quotaClassId: "", requestId: "", key }, context(signal));

/** Asks for one unit after another on `key`: a request always waits, so the key is busy. */
function keepBusy(controller: Controller, key: string, stop: AbortSignal): void {
  void (async () => {
    while (!stop.aborted) await ask(controller, key, stop).catch(() => undefined);
  })();
}

/** One unit on `key` every `everyMs`: a light key, never waiting. */
function trickle(controller: Controller, clock: ManualClock, key: string, everyMs: number, stop: AbortSignal): void {
  void (async () => {
    while (!stop.aborted) {
      await ask(controller, key, stop).catch(() => undefined);
      await clock.sleep(everyMs, stop).catch(() => undefined);
    }
  })();
}

describe("adaptive keyed throttler (virtual time)", () => {
  it("one key kept busy is demand: the template's loop raises the limit of every key", async () => {
    const { clock, controller, lines, api } = setup();
    const stop = new AbortController();
    keepBusy(controller, "busy", stop.signal);
    assert.equal(api().limit, 4);
    await clock.advance(1_000);
    await clock.advance(0);
    assert.equal(api().adaptive?.limitInForce, 6, lines.join("\n"));
    assert.ok(
      lines.some((l) => /^adaptive api: raise limit 4 -> 6: load 0\.2 below \[0\.9, 0\.95\]/.test(l)),
      lines.join("\n"),
    );
    // The new limit reaches the keys: "busy" now runs at 6/s, and a new key starts with it.
    await clock.advance(1_000);
    const limitNow = api().adaptive?.limitInForce ?? 0;
    assert.ok(limitNow > 6, `still raising while the key is busy and the load low: ${limitNow}`);
    stop.abort();
    controller.close();
  });

  it("twenty keys each using little are no demand: the limit holds (it follows the busiest key, not the sum)", async () => {
    const { clock, controller, lines, api } = setup();
    const stop = new AbortController();
    for (let i = 0; i < 20; i++) trickle(controller, clock, `light-${i}`, 2_000, stop.signal);
    await clock.advance(10_000);
    await clock.advance(0);
    assert.equal(api().adaptive?.limitInForce, 4, `20 keys at 0.5/s each (10/s in all) move no key's limit of 4:\n${lines.join("\n")}`);
    assert.ok(!lines.some((l) => /adaptive api: raise/.test(l)), lines.join("\n"));
    stop.abort();
    controller.close();
  });

  it("a concurrency template sees the units the busiest key has in use: a key full with a waiter raises every key's limit", async () => {
    const { clock, controller, lines, api } = setup({}, "concurrency");
    const stop = new AbortController();
    for (let i = 0; i < 4; i++) await ask(controller, "full", stop.signal);
    await ask(controller, "light", stop.signal);
    let waiterGranted = false;
    void ask(controller, "full", stop.signal).then(
      () => (waiterGranted = true),
      () => undefined,
    );
    await clock.advance(1_000);
    await clock.advance(0);
    assert.equal(api().adaptive?.limitInForce, 6, lines.join("\n"));
    assert.equal(waiterGranted, true, "the raised limit reached the key: its waiter has a unit");
    stop.abort();
    controller.close();
  });
});
