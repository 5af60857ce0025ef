// A capacity loss on an adaptive concurrency limit (docs/design.md §11.3) run through a failover group of
// stand-ins in virtual time (failover-stand-ins.ts), for the tests that a successor decides as its
// predecessor would have: packages/controller/test/adaptive-failover.test.ts (the state handed over
// in memory) and packages/kafka/test/controller-state-adaptive-failover.test.ts (through the
// controller-state record's JSON, as on Kafka).
import assert from "node:assert/strict";
import { ManualClock } from "@sluice/core";
import type { CallContext } from "@sluice/protocol";
import { validateDynamicSpec } from "@sluice/spec";
import type { LoadReading } from "../src/index.ts";
import type { AdaptiveLawState } from "@sluice/failover-ports";
import { MemoryStore, startStandInMember } from "./failover-stand-ins.ts";

/**
 * Inside the band, then a saturated reading with nothing raised → the law halves at once (the
 * system lost capacity), then holds while the readings cannot show the cut yet (the first) or are
 * falling (the cut coming through), then the load is back inside. 20 units stay in use throughout
 * (one holder), nobody waits.
 */
export const LOSS_READINGS: readonly number[] = [0.92, 1.0, 1.0, 0.98, 0.93];

/** What an unbroken run of the law decides on LOSS_READINGS: `${action} ${limit}` per reading. */
export const LOSS_DECISIONS: readonly string[] = ["hold 20", "cut 10", "hold 10", "hold 10", "hold 10"];

const parsed = validateDynamicSpec({
  throttlers: {
    tasks: {
      kind: "concurrency",
      lease_timeout: "30s",
      adaptive: { load: { module: "./load.ts" }, target: { low: 0.9, high: 0.95 }, initial_limit: 20, min_limit: 1, max_limit: 100, interval: "1s" },
    },
  },
});
assert.ok(parsed.ok);
const LOSS_SPEC = parsed.value;

export interface LossStep {
  readonly action: string | null;
  readonly limit: number | null;
  readonly reason: string | null;
}

/** Optional fields of the law's state a test can remove from the persisted record (what an older record lacks). */
export type ForgettableLawField = "steadyLast" | "sinceLossCut" | "lastLoad";

export interface LossRunOptions {
  /** The store of the group (a fresh one per run); default an in-memory one. */
  readonly store?: MemoryStore;
  /** Readings the first leader decides before it closes and a second member takes over; null: never. */
  readonly failoverAfter: number | null;
  /** Removed from the persisted law's state before the takeover. */
  readonly forget?: readonly ForgettableLawField[];
}

const context = (): CallContext => ({ deadlineAt: null, signal: new AbortController().signal, metadata: {} });
const settle = async () => {
  for (let i = 0; i < 5; i++) await new Promise((resolve) => setImmediate(resolve));
};

/** The decisions on LOSS_READINGS, one per reading, and every member's log lines. */
export async function lossRun(options: LossRunOptions): Promise<{ steps: LossStep[]; lines: string[] }> {
  const clock = new ManualClock(1_700_000_000_000);
  const store = options.store ?? new MemoryStore();
  const load = { reading: { ok: true, load: 0 } as LoadReading };
  const member = async (address: string) => {
    const started = await startStandInMember({
      store,
      clock,
      address,
      dynamicSpec: LOSS_SPEC,
      loadSourceOf: () => ({ description: "the test", read: async () => load.reading }),
    });
    return { ...started, tasks: () => started.throttler("tasks") };
  };
  let current = await member("127.0.0.1:7001");
  await current.lead(1);
  await current.controller.requestQuota({ throttlerId: "tasks", clientId: "w", amount: 20, timestampMs: 0, quotaClassId: "", requestId: "w-1" }, context());
  const steps: LossStep[] = [];
  const lines: string[] = [];
  for (const [i, reading] of LOSS_READINGS.entries()) {
    if (i === options.failoverAfter) {
      forget(store, options.forget ?? []);
      lines.push(...current.lines);
      await current.controller.close();
      current = await member("127.0.0.1:7002");
      await current.lead(2);
      assert.equal(current.tasks().concurrency?.heldUnits, 20, "the successor has the holder's units in use");
    }
    load.reading = { ok: true, load: reading };
    await clock.advance(1_000);
    await settle();
    const snapshot = current.tasks().adaptive;
    steps.push({ action: snapshot?.lastAction ?? null, limit: current.tasks().limit, reason: snapshot?.lastReason ?? null });
  }
  lines.push(...current.lines);
  await current.controller.close();
  return { steps, lines };
}

function forget(store: MemoryStore, fields: readonly ForgettableLawField[]): void {
  const record = store.throttler("tasks");
  const persisted = record?.adaptive;
  assert.ok(record && persisted, "the leader persisted its adaptive state");
  if (fields.length === 0) return;
  const law: { -readonly [K in keyof AdaptiveLawState]: AdaptiveLawState[K] } = { ...persisted.law };
  for (const field of fields) delete law[field];
  const throttlers = new Map(store.state.throttlers);
  throttlers.set("tasks", { ...record, adaptive: { ...persisted, law } });
  store.state = { ...store.state, throttlers };
}
