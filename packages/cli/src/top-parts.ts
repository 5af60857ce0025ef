import { ITERATION_PARTS, type IterationPart } from "@sluice/runtime";

// `sluice top --metrics <url>`: each computation's share of iteration time per part (docs/design.md §15),
// e.g. `throttle 62% · process 30% · output 6% · commit 2%`, from the workers' histogram
// sluice_worker_iteration_part_seconds on their /metrics. The controller does not see the workers'
// iterations, so top reads the workers' endpoints (`sluice run --http-port`, `sluice worker
// --metrics-port`) besides the controller's DescribeThrottlers.

/** computation → part → seconds (cumulative), summed over the endpoints read. */
export type PartSums = ReadonlyMap<string, Readonly<Record<IterationPart, number>>>;

export interface PartsReading {
  readonly sums: PartSums;
  /** Endpoints that could not be read, with why. */
  readonly errors: readonly string[];
}

const SUM_LINE = /^sluice_worker_iteration_part_seconds_sum\{([^}]*)\} (\S+)$/;
const LABEL = /([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"/g;
const SHORT: Record<IterationPart, string> = { "Input.Throttle": "throttle", Process: "process", Output: "output", Commit: "commit" };

/** The part sums of one Prometheus exposition, added into `into`. */
export function addPartSums(text: string, into: Map<string, Record<IterationPart, number>>): void {
  for (const line of text.split("\n")) {
    const match = SUM_LINE.exec(line);
    if (!match) continue;
    const labels: Record<string, string> = {};
    for (const [, key, value] of (match[1] ?? "").matchAll(LABEL)) labels[key ?? ""] = (value ?? "").replace(/\\(.)/g, "$1");
    const computation = labels["computation_id"];
    const part = ITERATION_PARTS.find((p) => p === labels["part"]);
    const seconds = Number(match[2]);
    if (computation === undefined || part === undefined || !Number.isFinite(seconds)) continue;
    let sums = into.get(computation);
    if (!sums) {
      sums = { "Input.Throttle": 0, Process: 0, Output: 0, Commit: 0 };
      into.set(computation, sums);
    }
    sums[part] += seconds;
  }
}

/** GET every endpoint's /metrics (at most `timeoutMs` each: a busy worker answers late) and add up their part sums. */
export async function readPartSums(urls: readonly string[], timeoutMs = 10_000): Promise<PartsReading> {
  const sums = new Map<string, Record<IterationPart, number>>();
  const errors: string[] = [];
  await Promise.all(
    urls.map(async (url) => {
      try {
        const response = await fetch(url, { signal: AbortSignal.timeout(timeoutMs) });
        if (!response.ok) throw new Error(`HTTP ${response.status}`);
        addPartSums(await response.text(), sums);
      } catch (error) {
        errors.push(`${url}: ${error instanceof Error ? error.message : String(error)}`);
      }
    }),
  );
  return { sums, errors };
}

/** `throttle 62% · process 30% · output 6% · commit 2%` of the time between two readings (or since start); null when none passed. */
export function partShares(after: Readonly<Record<IterationPart, number>>, before?: Readonly<Record<IterationPart, number>>): string | null {
  const spent = ITERATION_PARTS.map((p) => Math.max(0, after[p] - (before?.[p] ?? 0)));
  const total = spent.reduce((sum, s) => sum + s, 0);
  if (!(total > 0)) return null;
  return ITERATION_PARTS.map((p, i) => `${SHORT[p]} ${Math.round(((spent[i] ?? 0) / total) * 100)}%`).join(" · ");
}

/** The frame's section: a header, then one line per computation; `previous` makes the shares those of the last interval. */
export function partLines(reading: PartsReading, previous: PartSums | undefined, dim: (text: string) => string): string[] {
  const lines = ["", dim(`COMPUTATION            EPOCH PARTS (share of iteration time${previous ? ", last interval" : ", since start"})`)];
  for (const computation of [...reading.sums.keys()].sort()) {
    const sums = reading.sums.get(computation);
    if (!sums) continue;
    const shares = partShares(sums, previous?.get(computation)) ?? "idle";
    lines.push(`${computation.length >= 22 ? `${computation.slice(0, 21)} ` : computation.padEnd(22)} ${shares}`);
  }
  if (reading.sums.size === 0 && reading.errors.length === 0) lines.push(dim("no iteration parts on the --metrics endpoints yet"));
  for (const error of reading.errors) lines.push(dim(`✗ ${error}`));
  return lines;
}
