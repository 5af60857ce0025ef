// RequestQuota over loopback gRPC: the controller in a child process, closed-loop callers here.
// Against the same proto served by bare grpc-js (the transport's floor), run for run.
import { BenchChild, type ChildEvent } from "../lib/child.ts";
import { formatNumber } from "../lib/format.ts";
import type { GroupContext } from "../lib/group.ts";
import { CALLERS_PER_CHANNEL, closedLoopLoad } from "../lib/grpc-load.ts";
import { controllerSpec } from "../lib/specs.ts";
import { percentiles } from "../lib/stats.ts";

const LEVELS = [1, 16, 256] as const;
const ECHO = "bare grpc-js echo (same proto)";

interface Sample {
  readonly grantsPerS: number;
  readonly p50Ms: number;
  readonly p99Ms: number;
  /** Share of one core the server process used during the window. */
  readonly serverCpu: number;
  /** grants/s ÷ serverCpu: what one fully busy core would serve at this load. */
  readonly grantsPerCpuS: number;
}

export async function measureControllerThroughput(g: GroupContext): Promise<void> {
  const reps = g.pick(3, 2);
  const warmupMs = g.pick(700, 150);
  const windowMs = g.pick(2500, 300);
  const sluice = BenchChild.start("controller-process.ts", { mode: "sluice", spec: controllerSpec({ open: {} }) });
  const echo = BenchChild.start("controller-process.ts", { mode: "grpc-echo" });
  const [sluiceReady, echoReady] = await Promise.all([sluice.waitForType("ready", 30_000), echo.waitForType("ready", 30_000)]);
  const servers = [
    { name: "Sluice", child: sluice, address: String(sluiceReady["address"]) },
    { name: ECHO, child: echo, address: String(echoReady["address"]) },
  ];
  const samples = new Map<string, Sample[]>();
  g.log(`${reps} runs × ${LEVELS.length} levels × 2 servers, ${windowMs} ms windows after ${warmupMs} ms warm-up`);
  for (let rep = 0; rep < reps; rep++) {
    for (const clients of LEVELS) {
      for (const server of rep % 2 === 0 ? servers : [...servers].reverse()) {
        let before: ChildEvent | null = null;
        let after: ChildEvent | null = null;
        const load = await closedLoopLoad({
          address: server.address,
          throttlerId: "open",
          clients,
          warmupMs,
          windowMs,
          onWindow: async (edge) => {
            const usage = await server.child.request({ type: "usage" });
            if (edge === "start") before = usage;
            else after = usage;
          },
        });
        if (load.errors > 0) g.note(`${server.name} at ${clients} clients: ${load.errors} failed calls (first: ${load.firstError})`);
        const [p50 = NaN, p99 = NaN] = percentiles(load.latenciesMs, [0.5, 0.99]);
        const grantsPerS = (load.calls * 1000) / load.windowMs;
        const serverCpu = cpuShare(before, after);
        const sample: Sample = { grantsPerS, p50Ms: p50, p99Ms: p99, serverCpu, grantsPerCpuS: grantsPerS / serverCpu };
        const key = `${server.name}@${clients}`;
        samples.set(key, [...(samples.get(key) ?? []), sample]);
        g.log(
          `run ${rep + 1} ${server.name} ${clients} clients: ${formatNumber(grantsPerS)} grants/s, p50 ${formatNumber(p50)} ms, p99 ${formatNumber(p99)} ms, server at ${formatNumber(serverCpu * 100)} % of a core`,
        );
      }
    }
  }
  await Promise.all([sluice.stop(), echo.stop()]);

  const runsOf = (name: string, clients: number, pick: (s: Sample) => number) => (samples.get(`${name}@${clients}`) ?? []).map(pick);
  const published = {
    Gubernator: ">2,000 req/s per node in production (README)",
    Doorman: "design target ≥1,000 QPS per server (doc/design.md)",
  };
  const figures = new Map<string, ReturnType<GroupContext["add"]>>();
  for (const clients of LEVELS) {
    const label = `${clients} concurrent ${clients === 1 ? "client" : "clients"}`;
    figures.set(
      `throughput@${clients}`,
      g.add({
        id: `controller.rpc.throughput.${clients}`,
        label: `RequestQuota grants/s, ${label}`,
        unit: "grants/s",
        better: "higher",
        sluice: runsOf("Sluice", clients, (s) => s.grantsPerS),
        peers: { [ECHO]: runsOf(ECHO, clients, (s) => s.grantsPerS) },
        ...(clients === 256 ? { published } : {}),
        note: `closed-loop callers in the bench process (one gRPC channel per ${CALLERS_PER_CHANNEL} callers), unlimited throttler, amount 1, a new request id per call; the load generator shares the 2 cores, so this is often its limit, not the server's`,
      }),
    );
    figures.set(
      `cpu@${clients}`,
      g.add({
        id: `controller.rpc.per_cpu_second.${clients}`,
        label: `grants per server CPU-second, ${label}`,
        unit: "grants/CPU-s",
        better: "higher",
        sluice: runsOf("Sluice", clients, (s) => s.grantsPerCpuS),
        peers: { [ECHO]: runsOf(ECHO, clients, (s) => s.grantsPerCpuS) },
        note: "grants/s ÷ the server process's CPU time per second (user + system, all its threads): the rate one fully busy core would sustain",
      }),
    );
    figures.set(
      `p50@${clients}`,
      g.add({
        id: `controller.rpc.p50.${clients}`,
        label: `RequestQuota p50 latency, ${label}`,
        unit: "ms",
        better: "lower",
        sluice: runsOf("Sluice", clients, (s) => s.p50Ms),
        peers: { [ECHO]: runsOf(ECHO, clients, (s) => s.p50Ms) },
      }),
    );
    figures.set(
      `p99@${clients}`,
      g.add({
        id: `controller.rpc.p99.${clients}`,
        label: `RequestQuota p99 latency, ${label}`,
        unit: "ms",
        better: "lower",
        sluice: runsOf("Sluice", clients, (s) => s.p99Ms),
        peers: { [ECHO]: runsOf(ECHO, clients, (s) => s.p99Ms) },
        note: "measured at the caller: includes the client's own gRPC work on the shared cores",
      }),
    );
  }
  const perCpu = figures.get("cpu@256");
  const raw = figures.get("throughput@256");
  if (perCpu && raw) {
    g.goal({
      id: "controller.rpc.throughput",
      text: "≥ 20,000 grants/s on one core",
      figure: perCpu,
      value: perCpu.sluice?.median ?? null,
      target: 20_000,
      compare: ">=",
      describe: `${formatNumber(perCpu.sluice?.median ?? NaN)} grants per controller CPU-second at 256 clients (raw ${formatNumber(raw.sluice?.median ?? NaN)} grants/s with the load generator on the other core)`,
    });
  }
  const p99 = figures.get("p99@16");
  if (p99) g.goal({ id: "controller.rpc.p99", text: "p99 < 2 ms at 16 clients", figure: p99, value: p99.sluice?.median ?? null, target: 2, compare: "<" });
}

function cpuShare(before: ChildEvent | null, after: ChildEvent | null): number {
  if (!before || !after) return Number.NaN;
  const cpuMs = Number(after["cpuMs"]) - Number(before["cpuMs"]);
  const wallMs = Number(after["at"]) - Number(before["at"]);
  return wallMs > 0 ? cpuMs / wallMs : Number.NaN;
}
