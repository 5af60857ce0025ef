// Group 9: keyed throttlers (issue #23, docs/design.md §11.4) next to what people use instead for a
// limit per customer: rate-limiter-flexible's in-memory per-key limiter, measured here, and
// Gubernator's published figures (a Go cluster: no local peer; its figures are cited, not measured).
//   (a) heap per key: the controller's per idle key at 100,000 keys (goal ≤ 300 B) and per active
//       key; a client's per key used, before and after its idle keys are dropped;
//   (b) key-grants per controller CPU-second, 10,000 active keys over the QuotaStream (keys-stream.ts);
//   (c) a client's QuotaStream frames per request_period with 10,000 keys (keys-stream.ts);
//   (d) over-grant per key after a failover, in virtual time (lib/keyed-failover.ts).
import { RateLimiterMemory } from "rate-limiter-flexible";
import { BenchChild } from "../lib/child.ts";
import { formatNumber } from "../lib/format.ts";
import type { BenchGroup, GroupContext } from "../lib/group.ts";
import { keyedFailoverOverGrant, type FailoverRun } from "../lib/keyed-failover.ts";
import { measureOverStream } from "./keys-stream.ts";

const RLF = "rate-limiter-flexible RateLimiterMemory";
const GUBERNATOR_CACHE = "an LRU cache of 50,000 rate limits per node by default (GUBER_CACHE_SIZE, example.conf); no heap figure per key published";
const HEAP_GOAL_BYTES = 300;

export const keys: BenchGroup = {
  id: "keys",
  title: "9. Keyed throttlers: many keys on one controller, next to rate-limiter-flexible and Gubernator's published figures",
  async run(g) {
    for (const [part, measure] of [
      ["heap", measureHeap],
      ["key-grants and frames", measureOverStream],
      ["failover", measureFailover],
    ] as const) {
      const startedAt = performance.now();
      await measure(g);
      g.log(`${part}: ${formatNumber((performance.now() - startedAt) / 1000)} s`);
    }
  },
};

/** The subjects' heap figures, measured one after another in one child process. */
async function memoryRuns(subjects: readonly string[], keys: number, activeKeys: number): Promise<Map<string, Record<string, number>>> {
  const child = BenchChild.start("keyed-memory-process.ts", { subjects, keys, activeKeys }, { nodeArgs: ["--expose-gc"] });
  try {
    const out = new Map<string, Record<string, number>>();
    for (const subject of subjects) {
      const result = await child.waitFor((event) => event.type === "result" && event["subject"] === subject, 300_000, `heap of ${subject}`);
      out.set(subject, Object.fromEntries(Object.entries(result).filter(([, value]) => typeof value === "number")) as Record<string, number>);
    }
    return out;
  } finally {
    await child.stop();
  }
}

async function measureHeap(g: GroupContext): Promise<void> {
  const reps = g.pick(2, 1);
  const keys = g.pick(100_000, 2_000);
  const activeKeys = g.pick(10_000, 500);
  const runs: Record<string, Record<string, number>[]> = { controller: [], "rate-limiter-flexible": [], client: [] };
  for (let rep = 0; rep < reps; rep++) {
    const order = rep % 2 === 0 ? ["controller", "rate-limiter-flexible", "client"] : ["client", "rate-limiter-flexible", "controller"];
    // A process per subject, so no subject's garbage counts against another; quick mode shares one.
    const shared = g.quick ? await memoryRuns(order, keys, activeKeys) : null;
    for (const subject of order) {
      const run = shared ? shared.get(subject) : (await memoryRuns([subject], keys, activeKeys)).get(subject);
      if (!run) continue;
      runs[subject]?.push(run);
      g.log(
        `heap run ${rep + 1} ${subject}: ${Object.entries(run)
          .map(([name, value]) => `${name} ${formatNumber(value)}`)
          .join(", ")}`,
      );
    }
  }
  const of = (subject: string, name: string) => (runs[subject] ?? []).map((run) => run[name] ?? Number.NaN);
  const count = keys.toLocaleString("en-US");
  const idle = g.add({
    id: "keys.heap.controller_idle",
    label: `controller heap per idle key, ${count} keys`,
    unit: "bytes",
    better: "lower",
    sluice: of("controller", "bytesPerIdleKey"),
    peers: { [`${RLF}, per key within its window`]: of("rate-limiter-flexible", "bytesPerKey") },
    published: { Gubernator: GUBERNATOR_CACHE },
    note:
      "heap after a full GC, minus before, ÷ keys; each key made by a RequestQuota (half left in debt), then idle past the parking delay (kept as its balance; idle_timeout 1 h, so none is forgotten); " +
      "rate-limiter-flexible keeps a record and a timer per key until its window ends, then forgets the key (a fixed window has no debt to keep); key strings of ~14 characters included",
  });
  g.add({
    id: "keys.heap.controller_active",
    label: `controller heap per active key (a bucket each), ${activeKeys.toLocaleString("en-US")} keys`,
    unit: "bytes",
    better: "lower",
    sluice: of("controller", "bytesPerActiveKey"),
    peers: { [`${RLF}, per key within its window`]: of("rate-limiter-flexible", "bytesPerKey") },
    note: "every key asked for within the parking delay (60 s): a whole bucket per key",
  });
  g.add({
    id: "keys.heap.client_used",
    label: `client heap per key used once, ${count} keys, while the keys' clients are kept`,
    unit: "bytes",
    better: "lower",
    sluice: of("client", "bytesPerKeyUsed"),
    note: "one DistributedThrottlerFactory (a job's clients), forKey(key).throttle(1) once per key against a stand-in controller that grants at once; ManualClock",
  });
  g.add({
    id: "keys.heap.client_after_idle",
    label: `client heap per key used once, ${count} keys, once they were idle 80 s`,
    unit: "bytes",
    better: "lower",
    sluice: of("client", "bytesPerKeyAfterIdle"),
    note:
      "a key's client with no call for 60 s that holds nothing is retired (its pool given back) and dropped; its forKey handles make a new one on their next call; " +
      `keys' clients left after the idle time, per run: ${of("client", "clientsLeft").join(", ")}`,
  });
  g.goal({
    id: "keys.heap.controller_idle",
    text: `≤ ${HEAP_GOAL_BYTES} B of controller heap per idle key, 100,000 keys live`,
    figure: idle,
    value: idle.sluice?.median ?? null,
    target: HEAP_GOAL_BYTES,
    compare: "<=",
  });
}

async function measureFailover(g: GroupContext): Promise<void> {
  // The over-grant is each key's own: forty keys show it (the leader's state write walks every
  // key per grant, so the run's cost grows with keys × grants).
  const keys = g.pick(40, 10);
  const limit = 10;
  // The gap is the median kill-leader failover measured by the fault harness (docs/operations/failure-behaviour.md).
  const plan = { keys, limit, leaderMs: 3_000, gapMs: 8_000, successorMs: 12_000 };
  g.log(`failover: ${keys} keys in debt at ${limit}/s, the leader dies after ${plan.leaderMs} ms, a successor leads ${plan.gapMs} ms later (virtual time)`);
  const restored = await keyedFailoverOverGrant({ ...plan, restore: true });
  const fresh = await keyedFailoverOverGrant({ ...plan, restore: false });
  const rlf = await rateLimiterFlexibleRestart(keys, limit);
  const describe = (run: FailoverRun) =>
    `max ${formatNumber(run.maxOverGrant)}, mean ${formatNumber(run.meanOverGrant)} units; ${run.keysOverGranted} of ${run.keys} keys over`;
  g.log(
    `failover: Sluice ${describe(restored)}; successor without per-key records ${describe(fresh)}; rate-limiter-flexible restarted: ${formatNumber(rlf)} units per key`,
  );
  g.add({
    id: "keys.failover.over_grant",
    label: `over-grant per key after a failover (the largest over ${keys.toLocaleString("en-US")} keys in debt), limit ${limit}/s`,
    unit: "units",
    better: "lower",
    sluice: [restored.maxOverGrant],
    peers: {
      "Sluice's successor without per-key records (keys start full)": [fresh.maxOverGrant],
      [`${RLF}, process restarted within a window`]: [rlf],
    },
    published: {
      Gubernator:
        'rate limits live in memory on their owner and are lost with it: "acceptable for a small subset of traffic to over request for a short period" (docs/architecture.md), i.e. up to a full limit per key',
    },
    withoutRatios: true,
    note:
      `virtual time (one run: it is deterministic): two FailoverControllers on the in-memory stand-ins of the state topic and the election, each key's first request taking 5–19 s of its limit; the leader dies after ${plan.leaderMs / 1000} s, ` +
      `a successor leads ${plan.gapMs / 1000} s later (the median kill-leader failover measured by the fault harness) and serves ${plan.successorMs / 1000} s more. Over-grant = a key's units granted − (capacity + limit × elapsed + 1), what one bucket that never failed may grant (it grants while its balance is ≥ 0, so its last request of 1 unit may end past capacity + limit × elapsed). ` +
      "rate-limiter-flexible: a fixed window of 10 points per key, consumed in full, the process restarted (a new limiter), the key consumed again within the same window",
  });
}

/** Units a key gets again in the same window after its in-memory limiter is lost (a restart). */
async function rateLimiterFlexibleRestart(keys: number, points: number): Promise<number> {
  const drain = async (limiter: RateLimiterMemory, key: string) => {
    let taken = 0;
    while (taken <= points) {
      try {
        await limiter.consume(key, 1);
        taken += 1;
      } catch {
        break;
      }
    }
    return taken;
  };
  let worst = 0;
  // A long window, so the restart falls inside it whatever the machine's speed.
  const before = new RateLimiterMemory({ points, duration: 60 });
  for (let i = 0; i < keys; i++) await drain(before, `customer-${i}`);
  const after = new RateLimiterMemory({ points, duration: 60 });
  for (let i = 0; i < keys; i++) worst = Math.max(worst, await drain(after, `customer-${i}`));
  return worst;
}
