import { formatNumber } from "./format.ts";
import { figure, type Figure, type FigureInput, type GroupResult } from "./results.ts";

/** One table of the suite: it measures, and records figures and goals through its context. */
export interface BenchGroup {
  readonly id: string;
  readonly title: string;
  run(context: GroupContext): Promise<void>;
}

export interface GoalInput {
  readonly id: string;
  readonly text: string;
  readonly figure: Figure;
  /** The value compared with the target; null when it could not be measured. */
  readonly value: number | null;
  readonly target: number;
  readonly compare: "<" | "<=" | ">=";
  /** How the value reads in the goals table, e.g. "0.12 µs (median of 7 runs; 0.11–0.15)". */
  readonly describe?: string;
}

export class GroupContext {
  constructor(
    readonly quick: boolean,
    readonly result: GroupResult,
    private readonly print: (line: string) => void,
  ) {}

  /** Progress for the person watching; not recorded. */
  log(line: string): void {
    this.print(`[${this.result.id}] ${line}`);
  }

  /** A caveat, skip or failure worth keeping: printed now and recorded in results.json. */
  note(message: string): void {
    this.result.messages.push(message);
    this.print(`[${this.result.id}] NOTE: ${message}`);
  }

  /** Full-run count or quick-run count. */
  pick<T>(full: T, quick: T): T {
    return this.quick ? quick : full;
  }

  /**
   * Runs independent measurements: side by side in quick mode (its figures are not read, and the
   * cores would otherwise idle while children start), one after another in a full run, each alone
   * on the machine.
   */
  async inTurn<const T extends readonly (() => Promise<unknown>)[]>(measurements: T): Promise<{ -readonly [K in keyof T]: Awaited<ReturnType<T[K]>> }> {
    if (this.quick) {
      // Every measurement settles before the group goes on (or its children are stopped): a sibling
      // still running would keep writing to the group's results after it failed.
      const settled = await Promise.allSettled(measurements.map((measure) => measure()));
      const failed = settled.find((outcome) => outcome.status === "rejected");
      if (failed) throw failed.reason;
      return settled.map((outcome) => (outcome as PromiseFulfilledResult<unknown>).value) as { -readonly [K in keyof T]: Awaited<ReturnType<T[K]>> };
    }
    const results: unknown[] = [];
    for (const measure of measurements) results.push(await measure());
    return results as { -readonly [K in keyof T]: Awaited<ReturnType<T[K]>> };
  }

  add(input: FigureInput): Figure {
    const made = figure(input);
    this.result.figures.push(made);
    return made;
  }

  goal(input: GoalInput): void {
    const met =
      input.value === null || !Number.isFinite(input.value)
        ? null
        : input.compare === "<"
          ? input.value < input.target
          : input.compare === "<="
            ? input.value <= input.target
            : input.value >= input.target;
    const stat = input.figure.sluice;
    const measured =
      input.describe ??
      (input.value === null
        ? "not measured"
        : `${formatNumber(input.value)} ${input.figure.unit}${stat && stat.runs.length > 1 ? ` (median of ${stat.runs.length} runs, ${formatNumber(stat.min)}–${formatNumber(stat.max)})` : ""}`);
    this.result.goals.push({ id: input.id, text: input.text, measured, met, figure: input.figure.id });
  }
}
