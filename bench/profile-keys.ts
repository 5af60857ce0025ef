// Group 9's key-grants run once with the controller under --cpu-prof, for finding where a key-grant's
// CPU goes:  node --import tsx bench/profile-keys.ts [--prof DIR] [--perf] [--keys N] [--unkeyed] [--callers N]
//   [--per-frame N] [--streams] [--runs N] [--window MS]
// The load is group 9's (b): each generator process a worker with one QuotaStream of frames of
// --per-frame calls (default 256), --callers calls open in all (default 2,048); --streams runs group
// 8's shape instead (a stream per 16 awaiting callers, 256 callers).
// Prints grants/s and grants per controller CPU-second; with --prof the controller writes a
// .cpuprofile into DIR when it stops (open it in Chrome's DevTools or speedscope).
// --in-process: no transport, the controller called in this process (lib/in-process-key-grants.ts);
// profile that with node --cpu-prof.
// --perf: the controller runs with --perf-basic-prof and its pid is printed, for a native profile
// with its JIT frames named (GC threads, builtins and grpc-js included):
//   perf record -F 1999 -g -p PID -- sleep 10; perf report --no-children --sort dso,sym -g none
// (SLUICE_E2E_BUILT=1 after `pnpm build`: the packages' dist/, one source line per line.)
import { BenchChild } from "./lib/child.ts";
import { GroupContext } from "./lib/group.ts";
import { controllerSpec } from "./lib/specs.ts";
import { measure } from "./groups/controller-throughput.ts";
import { inProcessKeyGrants } from "./lib/in-process-key-grants.ts";

const args = process.argv.slice(2);
const option = (name: string) => {
  const at = args.indexOf(name);
  return at >= 0 ? args[at + 1] : undefined;
};
const prof = option("--prof");
const keys = Number(option("--keys") ?? 10_000);
const keyed = !args.includes("--unkeyed");
const streams = args.includes("--streams");
const callers = Number(option("--callers") ?? (streams ? 256 : 2_048));
const perFrame = Number(option("--per-frame") ?? 256);
const runs = Number(option("--runs") ?? 3);
const windowMs = Number(option("--window") ?? 3_000);
if (args.includes("--in-process")) {
  for (const figure of inProcessKeyGrants({ keys, keyed, rounds: runs + 5, perRound: 200_000 })) {
    process.stdout.write(`${keyed ? `${keys} keys` : "unkeyed"}, in process: ${Math.round(figure)} grants/CPU-s\n`);
  }
  process.exit(0);
}
const spec = controllerSpec({ per_key: { limit: 1_000_000, keyed: { max_keys: 100_000 } }, one: { limit: 1_000_000 } });
const perf = args.includes("--perf");
const nodeArgs = [...(prof ? ["--cpu-prof", `--cpu-prof-dir=${prof}`] : []), ...(perf ? ["--perf-basic-prof"] : [])];
const controller = BenchChild.start("controller-process.ts", { mode: "sluice", spec }, { nodeArgs });
if (perf) process.stdout.write(`controller pid ${controller.pid}\n`);
const generators = Array.from({ length: 2 }, (_, i) => BenchChild.start("quota-load-process.ts", { name: `p${i}` }));
const g = new GroupContext(false, { id: "keys", title: "profile", status: "ok", messages: [], figures: [], goals: [], durationS: 0 }, (line) =>
  process.stderr.write(`${line}\n`),
);
try {
  const [ready] = await Promise.all([controller.waitForType("ready", 30_000), ...generators.map((child) => child.waitForType("ready", 30_000))]);
  const server = { name: "Sluice", child: controller, address: String(ready["address"]) };
  for (let run = 0; run < runs; run++) {
    const sample = await measure(g, server, generators, {
      mode: "closed",
      clients: callers,
      warmupMs: 1_000,
      windowMs,
      ...(streams ? { transport: "stream" as const } : { transport: "frames" as const, callsPerFrame: perFrame }),
      throttlerId: keyed ? "per_key" : "one",
      ...(keyed ? { keys } : {}),
    });
    process.stdout.write(
      `${keyed ? `${keys} keys` : "unkeyed"}: ${Math.round(sample.grantsPerS)} grants/s, controller at ${(sample.serverCpu * 100).toFixed(0)} % of a core → ${Math.round(sample.grantsPerCpuS)} grants/CPU-s\n`,
    );
  }
} finally {
  await Promise.all([controller.stop(), ...generators.map((child) => child.stop())]);
}
process.exit(0);
