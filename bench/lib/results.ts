import { ratioRuns, summarize, type Stat } from "./stats.ts";

/** Which way is good for a figure: time per call goes down, throughput goes up. */
export type Better = "lower" | "higher";

/** A peer's (or a baseline's) value of the same figure, measured in the same run. */
export interface PeerFigure {
  readonly value: Stat;
  /** Sluice ÷ peer, computed run by run and then summarized; null when Sluice was not measured. */
  readonly ratio: Stat | null;
  readonly note?: string;
}

export interface Figure {
  /** Stable id, `<group>.<figure>`; goals point at it. */
  readonly id: string;
  readonly label: string;
  readonly unit: string;
  readonly better: Better;
  /** Null when Sluice itself could not be measured (the note says why). */
  readonly sluice: Stat | null;
  readonly peers: Readonly<Record<string, PeerFigure>>;
  /** Figures published by peers that cannot run here (never measured in this run). */
  readonly published?: Readonly<Record<string, string>>;
  readonly note?: string;
}

export interface GoalResult {
  readonly id: string;
  /** The goal as the issue states it. */
  readonly text: string;
  /** What was compared with it, in words and figures. */
  readonly measured: string;
  /** null: not measured in this run (the group was skipped or failed). */
  readonly met: boolean | null;
  readonly figure: string;
}

export type GroupStatus = "ok" | "partial" | "skipped" | "failed";

export interface GroupResult {
  readonly id: string;
  readonly title: string;
  status: GroupStatus;
  /** Every skip, failure and caveat of the group, also printed as it happens. */
  readonly messages: string[];
  readonly figures: Figure[];
  readonly goals: GoalResult[];
  durationS: number;
}

export interface Machine {
  readonly nproc: number;
  readonly cpuModel: string;
  readonly node: string;
  readonly platform: string;
  readonly memoryGiB: number;
  /** 1-minute load average when the run started: other work on a shared machine shows up here. */
  readonly loadAverageAtStart: number;
}

export interface BenchResults {
  readonly schema: 1;
  readonly mode: "full" | "quick";
  readonly startedAt: string;
  durationS: number;
  readonly machine: Machine;
  readonly versions: Readonly<Record<string, string>>;
  readonly groups: GroupResult[];
}

export interface FigureInput {
  readonly id: string;
  readonly label: string;
  readonly unit: string;
  readonly better: Better;
  /** One value per run. */
  readonly sluice: readonly number[] | null;
  /** One value per run, in the same runs as Sluice's (ratios pair run i with run i). */
  readonly peers?: Readonly<Record<string, readonly number[] | { readonly runs: readonly number[]; readonly note?: string }>>;
  readonly published?: Readonly<Record<string, string>>;
  readonly note?: string;
  /** Counts whose ratio means nothing (0 ÷ 0 timers): peers are shown without one. */
  readonly withoutRatios?: boolean;
}

/** Summarizes per-run values into a Figure, with Sluice ÷ peer ratios paired run by run. */
export function figure(input: FigureInput): Figure {
  const sluice = input.sluice ? summarize(input.sluice) : null;
  const peers: Record<string, PeerFigure> = {};
  for (const [name, given] of Object.entries(input.peers ?? {})) {
    const runs = Array.isArray(given) ? (given as readonly number[]) : (given as { runs: readonly number[] }).runs;
    const note = Array.isArray(given) ? undefined : (given as { note?: string }).note;
    peers[name] = {
      value: summarize(runs),
      ratio: input.sluice && !input.withoutRatios ? summarize(ratioRuns(input.sluice, runs)) : null,
      ...(note !== undefined ? { note } : {}),
    };
  }
  return {
    id: input.id,
    label: input.label,
    unit: input.unit,
    better: input.better,
    sluice,
    peers,
    ...(input.published ? { published: input.published } : {}),
    ...(input.note !== undefined ? { note: input.note } : {}),
  };
}
