// Weighted classes end to end: a worker process runs three backlogged computations in classes of
// weight 5, 3 and 1 on one rows throttler served by a controller process; their processed rows are
// the shares. Meanwhile single messages go to an idle fourth computation (its own class), each on a
// partition of its own — a fresh job — and the time until it is processed is the class-switch latency.
import { BenchChild, type ChildEvent } from "../lib/child.ts";
import { formatNumber, formatPercent } from "../lib/format.ts";
import type { GroupContext } from "../lib/group.ts";
import { NOOP_COMPUTATION } from "../lib/specs.ts";

export const CLASS_LIMIT = 3000;
export const CHUNK = 10;
const WEIGHTS = { A: 5, B: 3, C: 1 } as const;
const PARTITIONS = 2;

export interface ClassRunFigures {
  /** Per run, per computation: share ÷ (weight ÷ Σ weights) − 1, end to end (rows processed). */
  readonly shareErrors: Record<string, number[]>;
  /** The same from the controller's class counters (granted). */
  readonly grantedShareErrors: Record<string, number[]>;
  /** Per run: the median and worst class-switch latency, ms. */
  readonly switchMedianMs: number[];
  readonly switchMaxMs: number[];
  readonly chunkMs: number;
}

export async function measureClasses(g: GroupContext): Promise<ClassRunFigures> {
  const reps = g.pick(3, 1);
  const warmupMs = g.pick(3000, 1000);
  const windowMs = g.pick(12_000, 1500);
  const probes = g.pick(6, 2);
  const chunkMs = (CHUNK / CLASS_LIMIT) * 1000;
  const out: ClassRunFigures = { shareErrors: {}, grantedShareErrors: {}, switchMedianMs: [], switchMaxMs: [], chunkMs };
  const total = Object.values(WEIGHTS).reduce((sum, w) => sum + w, 0);
  const rowsPerStream = Math.ceil(((CLASS_LIMIT * (warmupMs + windowMs + 2000)) / 1000) * 1.2);
  g.log(
    `classes: ${reps} runs, ${windowMs / 1000} s windows, limit ${CLASS_LIMIT}/s in chunks of ${CHUNK} (${formatNumber(chunkMs)} ms), ${probes} idle-class probes per run`,
  );
  for (let rep = 0; rep < reps; rep++) {
    const spec = classesSpec(probes);
    const controller = BenchChild.start("controller-process.ts", { mode: "sluice", spec });
    const address = String((await controller.waitForType("ready", 30_000))["address"]);
    const worker = BenchChild.start("pipeline-process.ts", {
      spec,
      controller: address,
      prefill: Object.keys(WEIGHTS).flatMap((name) =>
        Array.from({ length: PARTITIONS }, (_, partition) => ({
          stream: streamOf(name),
          partition,
          count: Math.ceil(rowsPerStream / PARTITIONS),
          firstTimestampMs: Date.now(),
          stepMs: 0,
        })),
      ),
    });
    try {
      await worker.waitForType("started", 60_000);
      await sleep(warmupMs);
      const [before, grantedBefore] = await Promise.all([worker.request({ type: "sample" }), classGranted(controller)]);
      // Probes go out spread over the window, each to a partition nobody has read yet.
      const gap = windowMs / (probes + 1);
      for (let p = 0; p < probes; p++) {
        await sleep(gap);
        worker.send({ type: "append", stream: "idle", partition: p });
      }
      await sleep(Math.max(0, windowMs - gap * probes));
      const [after, grantedAfter] = await Promise.all([worker.request({ type: "sample" }), classGranted(controller)]);
      const processed = Object.fromEntries(Object.keys(WEIGHTS).map((name) => [name, rowsOf(after, name) - rowsOf(before, name)]));
      const sum = Object.values(processed).reduce((a, b) => a + b, 0);
      const classSum = Object.keys(WEIGHTS).reduce((s, name) => s + (grantedAfter[name.toLowerCase()] ?? 0) - (grantedBefore[name.toLowerCase()] ?? 0), 0);
      for (const [name, weight] of Object.entries(WEIGHTS)) {
        const expected = weight / total;
        const share = (processed[name] ?? 0) / sum;
        (out.shareErrors[name] ??= []).push(share / expected - 1);
        const grantedShare = ((grantedAfter[name.toLowerCase()] ?? 0) - (grantedBefore[name.toLowerCase()] ?? 0)) / classSum;
        (out.grantedShareErrors[name] ??= []).push(grantedShare / expected - 1);
      }
      const latencies = worker.events.filter((e) => e.type === "probe").map((e) => Number(e["latencyMs"]));
      if (latencies.length < probes) g.note(`run ${rep + 1}: only ${latencies.length} of ${probes} idle-class probes were processed within the window`);
      const sorted = [...latencies].sort((a, b) => a - b);
      out.switchMedianMs.push(sorted[Math.floor((sorted.length - 1) / 2)] ?? Number.NaN);
      out.switchMaxMs.push(sorted.at(-1) ?? Number.NaN);
      g.log(
        `run ${rep + 1}: ${sum} rows in the window, shares ${Object.keys(WEIGHTS)
          .map((name) => `${name} ${formatPercent((processed[name] ?? 0) / sum, 1)}`)
          .join(", ")} (expected ${Object.values(WEIGHTS)
          .map((w) => formatPercent(w / total, 1))
          .join(", ")}); switch latencies ${sorted.map((v) => formatNumber(v)).join(", ")} ms`,
      );
    } finally {
      await Promise.all([worker.stop(), controller.stop()]);
    }
  }
  return out;
}

function streamOf(computation: string): string {
  return `in_${computation.toLowerCase()}`;
}

function classesSpec(probes: number): Record<string, unknown> {
  const names = Object.keys(WEIGHTS);
  return {
    pipeline: "bench-classes",
    streams: {
      ...Object.fromEntries(names.map((name) => [streamOf(name), { topic: streamOf(name), partitions: PARTITIONS }])),
      idle: { topic: "idle", partitions: probes },
    },
    computations: {
      ...Object.fromEntries(names.map((name) => [name, { module: NOOP_COMPUTATION, inputs: [streamOf(name)], max_rows_per_batch: 50 }])),
      Idle: { module: NOOP_COMPUTATION, inputs: ["idle"], max_rows_per_batch: 50 },
    },
    dynamic_spec: {
      throttlers: {
        weighted: {
          limit: CLASS_LIMIT,
          period: "1s",
          request_period: "200ms",
          max_grant_amount: CHUNK,
          classes: { ...Object.fromEntries(Object.entries(WEIGHTS).map(([name, weight]) => [name.toLowerCase(), { weight }])), idle: { weight: 1 } },
        },
      },
      computations: {
        ...Object.fromEntries(names.map((name) => [name, { input_rows_throttler_id: "weighted", input_rows_throttler_class_id: name.toLowerCase() }])),
        Idle: { input_rows_throttler_id: "weighted", input_rows_throttler_class_id: "idle" },
      },
    },
  };
}

function rowsOf(sample: ChildEvent, computation: string): number {
  const partitions = (sample["computations"] as Record<string, Record<string, { rows: number }>>)[computation] ?? {};
  return Object.values(partitions).reduce((sum, p) => sum + p.rows, 0);
}

async function classGranted(controller: BenchChild): Promise<Record<string, number>> {
  const reply = await controller.request({ type: "describe" });
  const snapshot = JSON.parse(String(reply["snapshotJson"])) as { throttlers: { id: string; classes: { id: string; granted: number }[] }[] };
  const classes = snapshot.throttlers.find((t) => t.id === "weighted")?.classes ?? [];
  return Object.fromEntries(classes.map((c) => [c.id, c.granted]));
}

function sleep(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms));
}

export { WEIGHTS as CLASS_WEIGHTS };
