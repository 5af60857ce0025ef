// `pnpm bench` — measures Sluice and its peers in the same run, on the same machine, and reports
// ratios. A benchmark, not a timed test: nothing here fails because the machine is slow. It exits
// non-zero only when a group could not run at all (an error), so CI's --quick run keeps it working.
import { mkdirSync, writeFileSync } from "node:fs";
import os from "node:os";
import { dirname } from "node:path";
import { type BenchChild, killAllChildrenNow, ownChildren, startChildrenFromBundles, stopChildren } from "./lib/child.ts";
import { bundleChildren, type ChildBundle } from "./lib/child-bundle.ts";
import { GroupContext, type BenchGroup } from "./lib/group.ts";
import { shareBroker } from "./lib/kafka.ts";
import { describeMachine } from "./lib/machine.ts";
import { parseOptions, USAGE, UsageError, type BenchOptions } from "./lib/options.ts";
import type { BenchResults, GroupResult } from "./lib/results.ts";
import { renderGoals, renderGroup } from "./lib/table.ts";
import { peerVersions } from "./lib/versions.ts";
import { accuracy } from "./groups/accuracy.ts";
import { controller } from "./groups/controller.ts";
import { deliveryCost } from "./groups/delivery-cost.ts";
import { localHotPath } from "./groups/local-hot-path.ts";
import { runtimeOverhead } from "./groups/runtime-overhead.ts";
import { quotaStream } from "./groups/quota-stream.ts";
import { scale } from "./groups/scale.ts";
import { smooth } from "./groups/smooth.ts";
import { keys } from "./groups/keys.ts";

/**
 * What one group may take in quick mode (CI's smoke run, test/e2e/bench-smoke.test.ts): one run of
 * each measurement, windows of a second or less, every group side by side with the others. A group
 * over it says so in its notes (a smoke test does not fail on a slow machine), so that its quick
 * counts get shortened.
 */
const QUICK_GROUP_BUDGET_S = 40;

const GROUPS: readonly BenchGroup[] = [localHotPath, controller, runtimeOverhead, accuracy, scale, deliveryCost, smooth, quotaStream, keys];

async function main(): Promise<number> {
  let options: BenchOptions;
  try {
    options = parseOptions(process.argv.slice(2));
  } catch (error) {
    if (!(error instanceof UsageError)) throw error;
    if (error.message) process.stderr.write(`${error.message}\n`);
    process.stderr.write(`${USAGE}\n`);
    return error.message ? 2 : 0;
  }
  const unknown = (options.only ?? []).filter((id) => !GROUPS.some((group) => group.id === id));
  if (unknown.length > 0) {
    process.stderr.write(`unknown group ${unknown.join(", ")}; groups: ${GROUPS.map((group) => group.id).join(", ")}\n`);
    return 2;
  }
  const selected = GROUPS.filter((group) => options.only === null || options.only.includes(group.id));
  const print = (line: string) => process.stderr.write(`${line}\n`);
  const machine = describeMachine();
  const startedAt = Date.now();
  const results: BenchResults = {
    schema: 1,
    mode: options.quick ? "quick" : "full",
    startedAt: new Date(startedAt).toISOString(),
    durationS: 0,
    machine,
    versions: peerVersions(),
    groups: [],
  };
  print(
    `sluice bench (${results.mode}): ${machine.nproc} cores, ${machine.cpuModel}, node ${machine.node}, load average ${machine.loadAverageAtStart}` +
      (options.quick ? " — quick mode: tiny counts, the figures say nothing about speed" : ""),
  );
  let failed = 0;
  const runGroup = async (group: BenchGroup, result: GroupResult): Promise<void> => {
    const context = new GroupContext(options.quick, result, print);
    const groupStartedAt = performance.now();
    const children = new Set<BenchChild>();
    print(`\n>> ${group.title}`);
    try {
      await ownChildren(children, () => group.run(context));
    } catch (error) {
      result.status = "failed";
      failed += 1;
      context.note(`the group failed: ${error instanceof Error ? (error.stack ?? error.message) : String(error)}`);
    } finally {
      await stopChildren(children);
    }
    result.durationS = (performance.now() - groupStartedAt) / 1000;
    if (options.quick && result.durationS > QUICK_GROUP_BUDGET_S)
      context.note(
        `quick mode: this group took ${result.durationS.toFixed(1)} s, over the ${QUICK_GROUP_BUDGET_S} s a smoke run of one group should take beside the others (load average ${os.loadavg()[0]?.toFixed(1)}): shorten its quick counts (g.pick)`,
      );
    process.stdout.write(`${renderGroup(result)}\n`);
    write(options.out, results, startedAt);
  };
  const planned = selected.map((group) => {
    const result: GroupResult = { id: group.id, title: group.title, status: "ok", messages: [], figures: [], goals: [], durationS: 0 };
    results.groups.push(result);
    return { group, result };
  });
  // Quick mode runs the groups side by side (each stops only the children it started): its figures
  // are not read, and one group after another left the cores idle while children started and timed
  // windows ran. A full run measures one group at a time, alone on the machine.
  const bundle: ChildBundle | null = options.quick ? await bundleChildren() : null;
  startChildrenFromBundles(bundle?.dir ?? null);
  const stopSharedBroker = options.quick ? shareBroker() : null;
  try {
    if (options.quick) await Promise.all(planned.map(({ group, result }) => runGroup(group, result)));
    else for (const { group, result } of planned) await runGroup(group, result);
  } finally {
    await stopSharedBroker?.();
    bundle?.remove();
  }
  write(options.out, results, startedAt);
  const goals = results.groups.flatMap((group) => group.goals);
  process.stdout.write(`\n== Goals\n${renderGoals(goals)}\n`);
  process.stdout.write(`\n${results.mode} run finished in ${results.durationS.toFixed(0)} s; results in ${options.out}\n`);
  if (failed > 0) process.stderr.write(`${failed} group(s) failed; see the notes above\n`);
  return failed > 0 ? 1 : 0;
}

function write(path: string, results: BenchResults, startedAt: number): void {
  results.durationS = (Date.now() - startedAt) / 1000;
  mkdirSync(dirname(path), { recursive: true });
  writeFileSync(path, `${JSON.stringify(results, null, 2)}\n`);
}

process.on("SIGINT", () => {
  killAllChildrenNow();
  process.exit(130);
});
process.on("exit", killAllChildrenNow);

main().then(
  (code) => process.exit(code),
  (error: unknown) => {
    process.stderr.write(`${error instanceof Error ? (error.stack ?? error.message) : String(error)}\n`);
    killAllChildrenNow();
    process.exit(1);
  },
);
