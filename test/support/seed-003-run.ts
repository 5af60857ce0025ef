// Seed 003 end to end without Kafka: `limit 10, period 1s, smooth: true` in front of the shared PDF
// generator service (pdf-service.ts), from one `sluice run` (embedded controller) or from two
// `sluice run` processes sharing one `sluice controller`, each with in-memory letters. The letters
// are a full backlog (backlog.ts) or the seed's publishers (bursty.ts); the computation throttles
// by hand (`getThrottlerOrThrow("pdf").throttle(1)`) or automatically (input_rows_throttler_id,
// max_rows_per_batch 1). Returns what the service saw.
import { writeFileSync } from "node:fs";
import { getPriority, setPriority } from "node:os";
import { join } from "node:path";
import { ROOT, sluice as startSluice, stopAll, writeSpec, type Child } from "./processes.ts";
import { PdfService, type AcceptedCall } from "./pdf-service.ts";

const FIXTURES = `${ROOT}/test/fixtures/seed-003`;

export interface Seed003Options {
  readonly processes: 1 | 2;
  readonly throttling: "manual" | "input";
  readonly arrivals: "backlog" | "bursty";
  /** Backlog: letters per process. */
  readonly lettersPerProcess?: number;
  /** Bursty: how long the publishers run (ms). */
  readonly publishMs?: number;
  readonly partitions?: number;
  readonly pdf?: Record<string, unknown>;
  /**
   * The scheduling priority (nice) of the processes of the run: the controller, the `sluice run`s
   * and this one; the generator's own thread then gets GENERATOR_NICE. Unset: the machine's
   * default for all.
   */
  readonly nice?: number;
}

export interface Seed003Result {
  readonly accepted: readonly AcceptedCall[];
  readonly refused: readonly AcceptedCall[];
  /** The most accepted calls in any closed 1,000 ms window. */
  readonly mostInOneSecond: number;
  /** The backlogged window (see backloggedRate) and the rate in it; null when too short. */
  readonly backlogged: { readonly fromMs: number; readonly toMs: number; readonly calls: number; readonly perSecond: number } | null;
  /** The tail of each `sluice run`'s stderr, for a failure's message. */
  readonly stderr: readonly string[];
  /** Whether the run's processes got the priority asked for (Seed003Options.nice). */
  readonly prioritised: boolean;
  /** When the generator's own thread was not running (PdfService.stalls). */
  readonly generatorStalls: readonly { readonly at: number; readonly ms: number }[];
}

/** The generator thread's priority when the run's processes get one (Seed003Options.nice). */
export const GENERATOR_NICE = -20;

export const PDF_THROTTLER = { limit: 10, period: "1s", request_period: "500ms", smooth: true } as const;

export async function runSeed003(options: Seed003Options): Promise<Seed003Result> {
  const ownPriority = getPriority();
  const prioritised = options.nice === undefined ? false : trySetPriority(0, options.nice);
  const sluice = (args: readonly string[], env: NodeJS.ProcessEnv = {}): Child => {
    const child = startSluice(args, env);
    if (prioritised && options.nice !== undefined) trySetPriority(child.pid, options.nice);
    return child;
  };
  // The generator's thread above the processes it measures (see pdf-service-worker.mjs).
  const { service, url } = await PdfService.start(options.processes, options.nice === undefined ? undefined : GENERATOR_NICE);
  const children: Child[] = [];
  try {
    const partitions = options.partitions ?? 1;
    const name = `seed003-${process.pid}-${Date.now().toString(36)}`;
    const computation = options.throttling === "manual" ? "manual-throttle.ts" : "input-throttled.ts";
    // Bursty: the seed's 8 letters/s, split between the processes (steady 4/s, bursts 4/s on average).
    const perSecond = options.processes === 1 ? 8 : 4;
    const letters = options.arrivals === "backlog" ? (options.lettersPerProcess ?? 150) : Math.ceil(((options.publishMs ?? 10_000) / 1000) * perSecond);
    const pipeline = (controllerAddress: string | null) => ({
      pipeline: name,
      ...(controllerAddress ? { controller: { address: controllerAddress } } : {}),
      streams: {
        letters: { topic: "letters", format: "json", partitions, generator: { module: `${FIXTURES}/${options.arrivals}.ts`, messages: letters } },
      },
      computations: { PdfCalls: { module: `${FIXTURES}/${computation}`, inputs: ["letters"], max_rows_per_batch: 1 } },
      dynamic_spec: {
        throttlers: { pdf: options.pdf ?? PDF_THROTTLER },
        ...(options.throttling === "input" ? { computations: { PdfCalls: { input_rows_throttler_id: "pdf" } } } : {}),
      },
    });
    const env = (id: string, publishers: string) => ({ PDF_GENERATOR_URL: url, SEED_003_PROCESS: id, SEED_003_PUBLISHERS: publishers });
    let runs: Child[];
    if (options.processes === 1) {
      runs = [sluice(["run", writeSpec(pipeline(null)), "--drain", "--quiet", "--worker-id", "a"], env("a", "steady,burst"))];
    } else {
      // Not startController: on a loaded machine `sluice controller` may take longer than its 20 s to listen.
      const controllerChild = sluice(["controller", writeSpec(pipeline(null)), "--port", "0"]);
      children.push(controllerChild);
      const listening = await controllerChild.waitFor(/listening on 127\.0\.0\.1:(\d+)/, 90_000);
      const controller = { address: `127.0.0.1:${listening[1]}` };
      const spec = writeSpec(pipeline(controller.address));
      // Two processes share the seed's traffic: one runs the steady publisher, the other the bursts.
      runs = [
        sluice(["run", spec, "--drain", "--quiet", "--worker-id", "a"], env("a", "steady")),
        sluice(["run", spec, "--drain", "--quiet", "--worker-id", "b"], env("b", "burst")),
      ];
    }
    children.push(...runs);
    const exits = await Promise.all(runs.map((run) => run.exited));
    exits.forEach((exit, i) => {
      if (exit.code !== 0) throw new Error(`sluice run ${i} exited with ${exit.code ?? exit.signal}\n${runs[i]?.stderr.slice(-3000)}`);
    });
    await service.flush();
    const accepted = [...service.accepted].sort((a, b) => a.at - b.at);
    // SEED_003_DUMP=<dir>: every call the generator saw, as JSON, for a closer look at a miss.
    const dump = process.env["SEED_003_DUMP"];
    if (dump) writeFileSync(join(dump, `${name}.json`), JSON.stringify({ options, accepted, refused: service.refused, generatorStalls: service.stalls }));
    return {
      accepted,
      refused: service.refused,
      mostInOneSecond: mostInClosedWindow(
        accepted.map((c) => c.at),
        1000,
      ),
      backlogged: backloggedRate(accepted, options.arrivals === "backlog" ? partitions : 1),
      stderr: runs.map((run) => run.stderr.slice(-4000)),
      prioritised,
      generatorStalls: service.stalls,
    };
  } finally {
    await stopAll(children, 0);
    await service.close();
    if (prioritised) trySetPriority(0, ownPriority);
  }
}

/** os.setPriority, false where the system refuses it (a negative nice needs CAP_SYS_NICE). */
function trySetPriority(pid: number, nice: number): boolean {
  try {
    setPriority(pid, nice);
    return true;
  } catch {
    return false;
  }
}

/**
 * Skipped at the start of the backlogged window: a starting controller grants nothing for one reach
 * (0.65 s here), and a process's first calls run code paths not yet compiled (at a load average of
 * 15–19, 3-slot gaps 1.5–2 s into the run, with every call reaching the generator within 2–17 ms).
 */
export const START_SKIP_MS = 2_000;

/**
 * The accepted rate while the throttler is backlogged: from START_SKIP_MS after the first accepted call
 * to the first moment a job (a process's partition) has no letter left: its process then has
 * fewer callers than before. Every process has its whole backlog from the start,
 * so the throttler is backlogged throughout, even while the controller serves one process alone:
 * it orders requests by the lag of their letters, and a process whose letters are older may take
 * every slot for seconds. (Counting from a second after the *last* process's first call, as this
 * once did, left no window at all when one process drained before the other began.) Counted as
 * calls after the window's first call over the time from that call to the window's last, so that
 * the rate of a perfect grid is its own spacing whatever the window's edges.
 */
export function backloggedRate(sorted: readonly AcceptedCall[], partitions = 1): Seed003Result["backlogged"] {
  // Per job: letters are numbered per process and go to the partitions round-robin, so a job that
  // runs out leaves its process with fewer callers than slots before the backlog as a whole ends.
  const lastOf = new Map<string, number>();
  for (const call of sorted) {
    const [owner = "", index = "0"] = call.id.split("-");
    lastOf.set(`${owner}/${Number(index) % partitions}`, call.at);
  }
  if (sorted.length < 2) return null;
  const start = (sorted[0]?.at ?? 0) + START_SKIP_MS;
  const end = Math.min(...lastOf.values());
  const inWindow = sorted.filter((call) => call.at >= start && call.at <= end);
  if (inWindow.length < 2) return null;
  const fromMs = inWindow[0]?.at ?? 0;
  const toMs = inWindow[inWindow.length - 1]?.at ?? 0;
  return { fromMs, toMs, calls: inWindow.length, perSecond: ((inWindow.length - 1) * 1000) / (toMs - fromMs) };
}

/** The most times in any closed window [t, t + lengthMs]. */
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
