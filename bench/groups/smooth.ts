// Group 7: shaping (docs/design.md §11.1, issue 10 item 5). A 1,000 units/s throttler shared by 8 jobs in 2
// processes, every job backlogged and taking 1 unit per call: what reaches the callers in every
// window, at what utilisation, for how many RPCs and how much CPU. Beside it the same at seed 003's
// own 10 units/s (issue 20), Sluice smooth and plain only. Subjects, interleaved run by run:
// Sluice smooth, Sluice plain (the CPU baseline of the goal), and p-throttle and bottleneck
// configured to pace (one limiter per process at half the rate: neither coordinates across
// processes without an external store, so a static split is what they offer here).
import { BenchChild } from "../lib/child.ts";
import { formatNumber } from "../lib/format.ts";
import type { BenchGroup, GroupContext } from "../lib/group.ts";
import { controllerSpec } from "../lib/specs.ts";
import { installedVersion } from "../lib/versions.ts";

export const SMOOTH_LIMIT = 1000;
/** Seed 003's rate: the 10/s rows. */
export const SEED_LIMIT = 10;
export const SMOOTH_REQUEST_PERIOD_MS = 500;
const PERIOD_MS = 1000;
const PROCESSES = 2;
const JOBS_PER_PROCESS = 4;
const BURST_WINDOW_MS = 10;

export type Subject = "sluice smooth" | "sluice plain" | "p-throttle" | "bottleneck";
const SUBJECTS: readonly Subject[] = ["sluice smooth", "sluice plain", "p-throttle", "bottleneck"];

export interface RunFigures {
  /** Most units in any closed window of `period`, over both processes. */
  readonly maxInPeriod: number;
  readonly maxIn10ms: number;
  /** Units delivered in the window ÷ (limit × window). */
  readonly utilisation: number;
  /** Units the controller granted in the window ÷ (limit × window) (Sluice only): what the clients were given. */
  readonly grantedUtilisation: number | null;
  /** RPCs per client per request_period (Sluice only). */
  readonly rpcsPerPeriod: number | null;
  /** CPU ms (jobs' processes + controller) per 1,000 units. */
  readonly cpuMsPer1000: number;
  /** The controller's share of it (Sluice only). */
  readonly controllerCpuMsPer1000: number | null;
  /** Timers the jobs' clients armed per 1,000 units (Sluice only): each is an event-loop wake-up. */
  readonly timersPer1000: number | null;
}

export const smooth: BenchGroup = {
  id: "smooth",
  title: "7. Shaping: a smooth throttler at 1,000 units/s (against pacing peers) and at 10 units/s, 8 jobs in 2 processes",
  async run(g) {
    const reps = g.pick(2, 1);
    const windowMs = g.pick(10_000, 500);
    const warmupMs = g.pick(2_000, 250);
    g.log(
      `${reps} runs of ${windowMs / 1000} s per subject at ${SMOOTH_LIMIT}/s, ${PROCESSES * JOBS_PER_PROCESS} jobs in ${PROCESSES} processes (throttle(1) in a loop)`,
    );
    const runs = new Map<Subject, RunFigures[]>(SUBJECTS.map((subject) => [subject, []]));
    const atFullRate = async (rep: number) => {
      // The order rotates from run to run, so that no subject always runs on a warmer machine.
      const order = SUBJECTS.map((_, i) => SUBJECTS[(i + rep) % SUBJECTS.length] as Subject);
      await g.inTurn(
        order.map((subject) => async () => {
          const figures = await measure(g, subject, windowMs, warmupMs);
          runs.get(subject)?.push(figures);
          g.log(
            `${subject}: ${formatNumber(figures.maxInPeriod)} most in any ${PERIOD_MS} ms, ${formatNumber(figures.maxIn10ms)} most in any ${BURST_WINDOW_MS} ms, ` +
              `utilisation ${formatNumber(figures.utilisation * 100)} %${figures.grantedUtilisation === null ? "" : ` (granted ${formatNumber(figures.grantedUtilisation * 100)} %)`}, ${figures.rpcsPerPeriod === null ? "no RPCs" : `${formatNumber(figures.rpcsPerPeriod)} RPCs per client per request_period`}, ` +
              `${formatNumber(figures.cpuMsPer1000)} CPU ms per 1,000 units${figures.controllerCpuMsPer1000 === null ? "" : ` (controller ${formatNumber(figures.controllerCpuMsPer1000)})`}` +
              `${figures.timersPer1000 === null ? "" : `, ${formatNumber(figures.timersPer1000)} client timers per 1,000 units`}`,
          );
        }),
      );
    };
    // Seed 003's rate: a window twice as long, so that one unit is half a percent of it.
    const seedRuns = new Map<Subject, RunFigures[]>(SEED_SUBJECTS.map((subject) => [subject, []]));
    const atSeedRate = async (rep: number) => {
      await g.inTurn(
        (rep % 2 === 0 ? SEED_SUBJECTS : [...SEED_SUBJECTS].reverse()).map((subject) => async () => {
          const figures = await measure(g, subject, windowMs * 2, warmupMs, () => [], SEED_LIMIT);
          seedRuns.get(subject)?.push(figures);
          g.log(
            `${subject} at ${SEED_LIMIT}/s: ${formatNumber(figures.maxInPeriod)} most in any ${PERIOD_MS} ms, utilisation ${formatNumber(figures.utilisation * 100)} %` +
              `${figures.grantedUtilisation === null ? "" : ` (granted ${formatNumber(figures.grantedUtilisation * 100)} %)`}, ${formatNumber(figures.rpcsPerPeriod ?? Number.NaN)} RPCs per client per request_period, ` +
              `${formatNumber(figures.cpuMsPer1000)} CPU ms per 1,000 units`,
          );
        }),
      );
    };
    // Every rep at the full rate, then every rep at seed 003's (quick mode: all of them at once).
    await g.inTurn([
      async () => {
        for (let rep = 0; rep < reps; rep++) await atFullRate(rep);
      },
      async () => {
        for (let rep = 0; rep < reps; rep++) await atSeedRate(rep);
      },
    ]);
    addSeedRows(g, seedRuns);
    const of = (subject: Subject, pick: (run: RunFigures) => number | null) => (runs.get(subject) ?? []).map((run) => pick(run) ?? Number.NaN);
    const peers = (pick: (run: RunFigures) => number | null, names: readonly Subject[] = ["sluice plain", "p-throttle", "bottleneck"]) =>
      Object.fromEntries(names.map((name) => [peerName(name), of(name, pick)]));

    const windowFigure = g.add({
      id: "smooth.max_in_period",
      label: `most units in any closed ${PERIOD_MS} ms window (limit × period = ${SMOOTH_LIMIT})`,
      unit: "units",
      better: "lower",
      sluice: of("sluice smooth", (run) => run.maxInPeriod),
      peers: peers((run) => run.maxInPeriod),
      withoutRatios: true,
      note: "units counted when they reach the caller, both processes' timelines merged (one machine, one clock)",
    });
    g.goal({
      id: "smooth.window",
      text: `at most limit × period (${SMOOTH_LIMIT}) units in every closed window of period, smooth, 8 jobs in 2 processes`,
      figure: windowFigure,
      value: windowFigure.sluice?.max ?? null,
      target: SMOOTH_LIMIT,
      compare: "<=",
      describe: `${formatNumber(windowFigure.sluice?.max ?? Number.NaN)} at most over every run (plain: ${formatNumber(windowFigure.peers["sluice plain"]?.value.max ?? Number.NaN)})`,
    });
    g.add({
      id: "smooth.max_in_10ms",
      label: `largest burst: most units in any ${BURST_WINDOW_MS} ms`,
      unit: "units",
      better: "lower",
      sluice: of("sluice smooth", (run) => run.maxIn10ms),
      peers: peers((run) => run.maxIn10ms),
      withoutRatios: true,
      note: `evenly paced at ${SMOOTH_LIMIT}/s is about ${(SMOOTH_LIMIT * BURST_WINDOW_MS) / 1000}`,
    });
    const utilisation = g.add({
      id: "smooth.utilisation",
      label: "units delivered ÷ (limit × window), every job backlogged",
      unit: "%",
      better: "higher",
      sluice: of("sluice smooth", (run) => run.utilisation * 100),
      peers: {
        "smooth: granted at the controller": of("sluice smooth", (run) => (run.grantedUtilisation ?? Number.NaN) * 100),
        ...peers((run) => run.utilisation * 100),
      },
      withoutRatios: true,
      note: "the paced rate is 96 % of the limit; what the controller granted beside what reached callers shows where the rest went",
    });
    g.goal({
      id: "smooth.utilisation",
      text: "a backlogged smooth throttler delivers ≥ 95 % of limit",
      figure: utilisation,
      value: utilisation.sluice?.median ?? null,
      target: 95,
      compare: ">=",
    });
    const rpcs = g.add({
      id: "smooth.rpcs",
      label: `RPCs per client per request_period (${SMOOTH_REQUEST_PERIOD_MS} ms)`,
      unit: "RPCs",
      better: "lower",
      sluice: of("sluice smooth", (run) => run.rpcsPerPeriod),
      peers: peers((run) => run.rpcsPerPeriod, ["sluice plain"]),
      withoutRatios: true,
    });
    g.goal({
      id: "smooth.rpcs",
      text: "≤ 1.5 RPCs per client per request_period at 1,000 units/s, smooth",
      figure: rpcs,
      value: rpcs.sluice?.median ?? null,
      target: 1.5,
      compare: "<=",
    });
    const cpu = g.add({
      id: "smooth.cpu",
      label: "CPU per 1,000 units (jobs' processes + controller)",
      unit: "CPU ms",
      better: "lower",
      sluice: of("sluice smooth", (run) => run.cpuMsPer1000),
      peers: peers((run) => run.cpuMsPer1000),
      note: "user + system time of every process of the subject over the window; the peers have no controller",
    });
    const ratio = cpu.peers["sluice plain"]?.ratio?.median ?? null;
    g.goal({
      id: "smooth.cpu",
      text: "CPU per unit of a smooth throttler ≤ ×1.5 of a plain one",
      figure: cpu,
      value: ratio,
      target: 1.5,
      compare: "<=",
      describe: `×${formatNumber(ratio ?? Number.NaN)} of plain (${formatNumber(cpu.sluice?.median ?? Number.NaN)} vs ${formatNumber(cpu.peers["sluice plain"]?.value.median ?? Number.NaN)} CPU ms per 1,000 units)`,
    });
  },
};

const SEED_SUBJECTS: readonly Subject[] = ["sluice smooth", "sluice plain"];

/** The 10/s rows: the window bound, the utilisation and the RPCs, smooth beside plain. */
function addSeedRows(g: GroupContext, runs: ReadonlyMap<Subject, RunFigures[]>): void {
  const of = (subject: Subject, pick: (run: RunFigures) => number | null) => (runs.get(subject) ?? []).map((run) => pick(run) ?? Number.NaN);
  const window = g.add({
    id: "smooth.seed.max_in_period",
    label: `at ${SEED_LIMIT}/s: most units in any closed ${PERIOD_MS} ms window (limit × period = ${SEED_LIMIT})`,
    unit: "units",
    better: "lower",
    sluice: of("sluice smooth", (run) => run.maxInPeriod),
    peers: { "sluice plain": of("sluice plain", (run) => run.maxInPeriod) },
    withoutRatios: true,
    note: "seed 003's rate, 8 jobs in 2 processes as above",
  });
  g.goal({
    id: "smooth.seed.window",
    text: `at most ${SEED_LIMIT} units in every closed window of 1 s at limit ${SEED_LIMIT}/s, smooth, 8 jobs in 2 processes`,
    figure: window,
    value: window.sluice?.max ?? null,
    target: SEED_LIMIT,
    compare: "<=",
  });
  const utilisation = g.add({
    id: "smooth.seed.utilisation",
    label: `at ${SEED_LIMIT}/s: units delivered ÷ (limit × window), every job backlogged`,
    unit: "%",
    better: "higher",
    sluice: of("sluice smooth", (run) => run.utilisation * 100),
    peers: {
      "smooth: granted at the controller": of("sluice smooth", (run) => (run.grantedUtilisation ?? Number.NaN) * 100),
      "sluice plain": of("sluice plain", (run) => run.utilisation * 100),
    },
    withoutRatios: true,
  });
  g.goal({
    id: "smooth.seed.utilisation",
    text: `a backlogged smooth throttler delivers ≥ 95 % of limit at ${SEED_LIMIT}/s`,
    figure: utilisation,
    value: utilisation.sluice?.median ?? null,
    target: 95,
    compare: ">=",
  });
  g.add({
    id: "smooth.seed.rpcs",
    label: `at ${SEED_LIMIT}/s: RPCs per client per request_period (${SMOOTH_REQUEST_PERIOD_MS} ms)`,
    unit: "RPCs",
    better: "lower",
    sluice: of("sluice smooth", (run) => run.rpcsPerPeriod),
    peers: { "sluice plain": of("sluice plain", (run) => run.rpcsPerPeriod) },
    withoutRatios: true,
    note: "one slot per answer up to 50/s (README, Shaping)",
  });
}

function peerName(subject: Subject): string {
  if (subject === "p-throttle" || subject === "bottleneck") return `${subject} ${installedVersion(subject)}, 2 × ${SMOOTH_LIMIT / PROCESSES}/s`;
  return subject;
}

/** Extra node arguments per process (`bench/profile-smooth.ts` passes `--cpu-prof`); none in the bench. */
export type NodeArgsFor = (role: "controller" | `jobs-${number}`) => readonly string[];

export async function measure(
  g: GroupContext | null,
  subject: Subject,
  windowMs: number,
  warmupMs: number,
  nodeArgsFor: NodeArgsFor = () => [],
  limit = SMOOTH_LIMIT,
): Promise<RunFigures> {
  const sluice = subject === "sluice smooth" || subject === "sluice plain";
  const controller = sluice
    ? BenchChild.start(
        "controller-process.ts",
        {
          mode: "sluice",
          spec: controllerSpec({
            paced: { limit, period: `${PERIOD_MS}ms`, request_period: `${SMOOTH_REQUEST_PERIOD_MS}ms`, smooth: subject === "sluice smooth" },
          }),
        },
        { nodeArgs: nodeArgsFor("controller") },
      )
    : null;
  const address = controller ? String((await controller.waitForType("ready", 90_000))["address"]) : "";
  const processes = Array.from({ length: PROCESSES }, (_, p) =>
    BenchChild.start(
      "paced-jobs-process.ts",
      {
        mode: sluice ? "sluice" : subject,
        clientIds: Array.from({ length: JOBS_PER_PROCESS }, (_, j) => `p${p}/job${j}`),
        controller: address,
        throttlerId: "paced",
        ratePerProcess: limit / PROCESSES,
      },
      { nodeArgs: nodeArgsFor(`jobs-${p}`) },
    ),
  );
  try {
    await Promise.all(processes.map((child) => child.waitForType("ready", 90_000)));
    // Quick mode shares the cores with the whole suite, where a window fixed in advance could end
    // before the first unit: its callers start at once, the window opens once every process has had
    // a unit and closes once each has counted one, after windowMs at least (`gated`). A full run
    // keeps its schedule fixed in advance.
    const gated = g?.quick ?? false;
    const startAt = Date.now() + (gated ? 0 : 300);
    let windowFrom = startAt + warmupMs;
    let windowTo = windowFrom + windowMs;
    for (const child of processes) child.send({ type: "go", startAt, windowFrom, windowTo, stopAt: windowTo + 300, ...(gated ? { gated } : {}) });
    if (gated) {
      await Promise.all(processes.map((child) => child.waitForType("taking", 60_000)));
      windowFrom = Date.now() + warmupMs;
      for (const child of processes) child.send({ type: "window", windowFrom });
    }
    await sleepUntil(windowFrom);
    const controllerFrom = controller ? Number((await controller.request({ type: "usage" }))["cpuMs"]) : 0;
    const grantedFrom = controller ? await granted(controller) : null;
    if (gated) {
      await Promise.all([sleepUntil(windowFrom + windowMs), ...processes.map((child) => child.waitForType("counted", 60_000))]);
      windowTo = Date.now();
      for (const child of processes) child.send({ type: "window", windowFrom, windowTo, stopAt: windowTo + 300 });
    }
    await sleepUntil(windowTo);
    const controllerTo = controller ? Number((await controller.request({ type: "usage" }))["cpuMs"]) : 0;
    const grantedTo = controller ? await granted(controller) : null;
    const results = await Promise.all(processes.map((child) => child.waitForType("result", 60_000)));
    const times = results.flatMap((event) => event["times"] as number[]).sort((a, b) => a - b);
    const cpuMs = results.reduce((sum, event) => sum + Number(event["cpuMs"]), 0) + (controllerTo - controllerFrom);
    const rpcs = results.reduce((sum, event) => sum + Number(event["rpcs"]), 0);
    const timers = results.reduce((sum, event) => sum + Number(event["timers"] ?? 0), 0);
    // windowMs, or a gated window's actual length.
    const measuredMs = windowTo - windowFrom;
    return {
      maxInPeriod: mostInClosedWindow(times, PERIOD_MS),
      maxIn10ms: mostInClosedWindow(times, BURST_WINDOW_MS),
      utilisation: times.length / ((limit * measuredMs) / 1000),
      grantedUtilisation: grantedFrom && grantedTo ? (grantedTo.granted - grantedFrom.granted) / ((limit * (grantedTo.at - grantedFrom.at)) / 1000) : null,
      rpcsPerPeriod: sluice ? rpcs / (PROCESSES * JOBS_PER_PROCESS) / (measuredMs / SMOOTH_REQUEST_PERIOD_MS) : null,
      cpuMsPer1000: (cpuMs * 1000) / Math.max(1, times.length),
      controllerCpuMsPer1000: controller ? ((controllerTo - controllerFrom) * 1000) / Math.max(1, times.length) : null,
      timersPer1000: sluice ? (timers * 1000) / Math.max(1, times.length) : null,
    };
  } finally {
    await Promise.all([...processes, ...(controller ? [controller] : [])].map((child) => child.stop()));
  }
}

/** The most times in any closed window [t, t + lengthMs] (the fullest windows start at a time). */
export function mostInClosedWindow(sorted: readonly number[], lengthMs: number): number {
  let most = 0;
  let end = 0;
  for (let start = 0; start < sorted.length; start++) {
    const from = sorted[start] ?? 0;
    while (end < sorted.length && (sorted[end] ?? 0) <= from + lengthMs) end++;
    most = Math.max(most, end - start);
  }
  return most;
}

async function granted(controller: BenchChild): Promise<{ granted: number; at: number }> {
  const reply = await controller.request({ type: "describe" });
  const at = Date.now();
  const snapshot = JSON.parse(String(reply["snapshotJson"])) as { throttlers: { id: string; counters: { granted: number } }[] };
  return { granted: snapshot.throttlers.find((t) => t.id === "paced")?.counters.granted ?? Number.NaN, at };
}

function sleepUntil(epochMs: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, Math.max(0, epochMs - Date.now())));
}
