// Over-grant per key after a failover, in virtual time (docs/design.md §5.3, §11.4): a failover group of
// two FailoverControllers on the in-memory stand-ins of the state topic and the election (the ones
// packages/controller's failover tests use), one keyed throttler, every key driven into debt and then
// asking one unit at a time. The leader dies (closed, as SIGKILL leaves it: nothing more written) and
// the successor takes over `gapMs` later. Each key's grants over the whole run are compared with
// what one bucket that never failed may grant in that time (capacity + limit × elapsed, plus the one
// unit it may grant on a balance of 0): the excess is that key's over-grant. Beside it, the same run
// with a successor that has no per-key records (every key starts full, as any limiter that keeps keys
// in memory only).
import { ManualClock } from "@sluice/core";
import type { CallContext } from "@sluice/protocol";
import { validateDynamicSpec } from "@sluice/spec";
import { MemoryStore, startStandInMember } from "../../packages/controller/test/failover-stand-ins.ts";

export interface FailoverRun {
  readonly keys: number;
  /** Units over capacity + limit × elapsed, per key: the largest and the mean. */
  readonly maxOverGrant: number;
  readonly meanOverGrant: number;
  /** Keys granted anything more than a bucket that never failed could have. */
  readonly keysOverGranted: number;
}

export interface FailoverPlan {
  readonly keys: number;
  readonly limit: number;
  /** Leader serves this long, then dies. */
  readonly leaderMs: number;
  /** Nobody serves this long (the measured kill-leader failover is 6–17 s). */
  readonly gapMs: number;
  /** The successor serves this long. */
  readonly successorMs: number;
  /** false: the successor reads no per-key record. */
  readonly restore: boolean;
}

const T0 = 1_700_000_000_000;
const STEP_MS = 50;
const context = (): CallContext => ({ deadlineAt: null, signal: new AbortController().signal, metadata: {} });
const jsonCodec = <T>(record: T): T => JSON.parse(JSON.stringify(record)) as T;

export async function keyedFailoverOverGrant(plan: FailoverPlan): Promise<FailoverRun> {
  const parsed = validateDynamicSpec({ throttlers: { api: { limit: plan.limit, period: "1s", keyed: { max_keys: plan.keys } } } });
  if (!parsed.ok) throw new Error(JSON.stringify(parsed.issues));
  const clock = new ManualClock(T0);
  const store = new MemoryStore(jsonCodec);
  const start = (index: number, from: MemoryStore) =>
    startStandInMember({ store: from, clock, address: `127.0.0.1:${7400 + index}`, dynamicSpec: parsed.value });
  const leader = await start(0, store);
  await leader.lead(1);
  let serving = leader.controller;
  let successorUp: () => void = () => undefined;
  const successorReady = new Promise<void>((resolve) => (successorUp = resolve));
  const granted = new Array<number>(plan.keys).fill(0);
  const endAt = T0 + plan.leaderMs + plan.gapMs + plan.successorMs;
  let stopped = false;

  const drive = async (i: number) => {
    const key = `customer-${i}`;
    // The first request takes a bucket and more: the key owes (amount − capacity) ÷ limit seconds.
    let amount = plan.limit * (5 + (i % 15));
    while (!stopped) {
      const asked = serving;
      try {
        await asked.requestQuota({ throttlerId: "api", clientId: "c", amount, timestampMs: 0, quotaClassId: "", requestId: "", key }, context());
        if (!stopped) granted[i] = (granted[i] ?? 0) + amount;
        amount = 1;
      } catch (error) {
        if (stopped) return;
        if (asked !== leader.controller) throw error; // only the leader's death is expected
        await successorReady; // the leader died under this request: ask the successor
      }
    }
  };
  const drivers = Array.from({ length: plan.keys }, (_, i) => drive(i));

  await clock.advanceTo(T0 + plan.leaderMs);
  await leader.controller.close();
  await clock.advance(plan.gapMs);
  const successor = await start(1, plan.restore ? store : new MemoryStore(jsonCodec));
  await successor.lead(2);
  serving = successor.controller;
  successorUp();
  while (clock.now() < endAt) await clock.advance(Math.min(STEP_MS, endAt - clock.now()));
  stopped = true;
  await successor.controller.close();
  await Promise.all(drivers);

  const elapsedS = (endAt - T0) / 1000;
  // Capacity (limit × a period of 1 s) + what accrues, + the last request's 1 unit: a bucket grants
  // while its balance is ≥ 0 and is paid after, so one that never failed may end one request past it.
  const bound = plan.limit + plan.limit * elapsedS + 1;
  const over = granted.map((units) => Math.max(0, units - bound));
  return {
    keys: plan.keys,
    maxOverGrant: Math.max(0, ...over),
    meanOverGrant: over.reduce((sum, units) => sum + units, 0) / plan.keys,
    keysOverGranted: over.filter((units) => units > 1e-9).length,
  };
}
