// The CPU time a failover leader spends working out one write of its state (the records of one group
// commit, docs/design.md §5.3) with --keys keys of a keyed throttler remembered (default 100,000), none
// of them full, after a grant on one of them: a walk of every key, as the writes were made before
// they looked at changed keys only (packages/controller/test/full-walk-writes.ts), next to the
// writes of packages/controller/src/failover/written-records.ts. In process, on virtual time, no
// store: only the computation a write waits for.
//   node --import tsx bench/profile-state-write.ts [--keys N] [--rounds N]
import { ManualClock } from "@sluice/core";
import { Controller } from "@sluice/controller";
import type { CallContext } from "@sluice/protocol";
import { validateDynamicSpec } from "@sluice/spec";
import { WrittenRecords } from "../packages/controller/src/failover/written-records.ts";
import { FullWalkWrites } from "../packages/controller/test/full-walk-writes.ts";

const args = process.argv.slice(2);
const option = (name: string, fallback: number) => {
  const at = args.indexOf(name);
  return at >= 0 ? Number(args[at + 1]) : fallback;
};
const keys = option("--keys", 100_000);
const rounds = option("--rounds", 7);

const clock = new ManualClock(1_700_000_000_000);
const parsed = validateDynamicSpec({ throttlers: { per_customer: { limit: 1, period: "100s", keyed: { max_keys: keys } } } });
if (!parsed.ok) throw new Error(JSON.stringify(parsed.issues));
const controller = new Controller({ dynamicSpec: parsed.value, computations: [], clock });
const context: CallContext = { deadlineAt: null, signal: new AbortController().signal, metadata: {} };
const grant = (key: string, amount: number) => {
  const answer = controller.requestQuotaNow(
    { throttlerId: "per_customer", clientId: "w0", amount, timestampMs: 0, quotaClassId: "", requestId: "", key },
    context,
  );
  if (answer instanceof Promise) throw new Error(`the grant on ${key} waited: the bench expects every key to have quota`);
};
// Each key 50 short of its 100: a record each, none refilling within the run.
for (let i = 0; i < keys; i++) grant(`customer-${i}`, 50);

const cpuMs = (work: () => void) => {
  const start = process.cpuUsage();
  work();
  const used = process.cpuUsage(start);
  return (used.user + used.system) / 1_000;
};
const walk = new FullWalkWrites();
const records = new WrittenRecords();
const firstWalkMs = cpuMs(() => walk.write(controller, 1, clock.now()));
const firstMs = cpuMs(() => records.committed(records.changes(controller, 1, clock.now()), clock.now()));
process.stdout.write(
  `${keys} keys remembered, none full. The first write (every key): walk ${firstWalkMs.toFixed(0)} ms, incremental ${firstMs.toFixed(0)} ms of CPU\n`,
);

const walkMs: number[] = [];
const incrementalMs: number[] = [];
for (let round = 0; round < rounds; round++) {
  await clock.advance(10);
  grant(`customer-${(round * 7_919) % keys}`, 1);
  // Both write what changed since their last write: the one key granted.
  walkMs.push(cpuMs(() => walk.write(controller, 1, clock.now())));
  incrementalMs.push(cpuMs(() => records.committed(records.changes(controller, 1, clock.now()), clock.now())));
}
const median = (figures: number[]) => [...figures].sort((a, b) => a - b)[Math.floor(figures.length / 2)] ?? Number.NaN;
process.stdout.write(
  `one write after a grant on 1 key, CPU ms (median of ${rounds}; all): walk of every key ${median(walkMs).toFixed(1)} (${walkMs.map((ms) => ms.toFixed(0)).join(", ")}), ` +
    `changed keys only ${median(incrementalMs).toFixed(3)} (${incrementalMs.map((ms) => ms.toFixed(3)).join(", ")}); ` +
    `${Math.round(median(walkMs) / median(incrementalMs))}× less\n`,
);
controller.close();
