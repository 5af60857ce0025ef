import * as z from "zod";
import { describeValue } from "./describe-value.ts";
import { mustBe } from "./rule-error.ts";

// Durations are written as a number with a unit ("500ms", "1.5s", "2m", "1h") or as whole
// milliseconds (500), the YT convention for integer durations (ytflow.md §0). Parsed, they are a
// number of milliseconds; the spec never carries a duration in any other unit.

export const DURATION_PATTERN = /^(\d+(?:\.\d+)?)(ms|s|m|h)$/;

const MS_PER_UNIT: Readonly<Record<string, number>> = { ms: 1, s: 1_000, m: 60_000, h: 3_600_000 };

const DURATION_RULE = 'a duration such as "500ms", "1.5s", "2m", "1h" or whole milliseconds';

/** Milliseconds of a duration; throws a RangeError that names the accepted forms otherwise. */
export function parseDuration(input: string | number): number {
  if (typeof input === "number") {
    if (Number.isSafeInteger(input) && input >= 0) return input;
    throw new RangeError(`expected ${DURATION_RULE}, got ${describeValue(input)}`);
  }
  const match = DURATION_PATTERN.exec(input);
  const amount = match?.[1];
  const factor = match?.[2] === undefined ? undefined : MS_PER_UNIT[match[2]];
  if (amount === undefined || factor === undefined) {
    throw new RangeError(`expected ${DURATION_RULE}, got ${describeValue(input)}`);
  }
  // Rounded to nanoseconds so that "1.1s" is 1100 and not 1100.0000000000002.
  return Math.round(Number(amount) * factor * 1e6) / 1e6;
}

/** "1500ms" → "1.5s": the shortest exact spelling, for messages and summaries. */
export function formatDuration(ms: number): string {
  for (const unit of ["h", "m", "s"] as const) {
    const factor = MS_PER_UNIT[unit] ?? 1;
    if (ms >= factor && Number.isInteger((ms / factor) * 1000)) return `${ms / factor}${unit}`;
  }
  return `${ms}ms`;
}

interface DurationBound {
  /** Smallest accepted value in milliseconds. */
  readonly minMs: number;
  /** When true the bound itself is rejected (`> minMs`). */
  readonly exclusive?: boolean;
}

/**
 * A duration field. With a bound, a parseable duration below it is reported with the bound in the
 * message (`period must be a duration of at least 1ms, got 0ms`).
 */
export function duration(bound?: DurationBound) {
  const boundText = bound === undefined ? undefined : `${bound.exclusive === true ? "greater than" : "of at least"} ${formatDuration(bound.minMs)}`;
  const error = mustBe(boundText === undefined ? DURATION_RULE : `${DURATION_RULE} (a duration ${boundText})`);
  const parsed = z
    .union(
      [
        z.string({ error }).regex(DURATION_PATTERN).describe('A number and a unit (ms, s, m or h): "500ms", "1.5s", "2m".'),
        // z.int() is safe here: the union reports its own issue, so its abort does not reach enclosing objects.
        z.int({ error }).min(0).describe("Whole milliseconds."),
      ],
      { error },
    )
    .transform(parseDuration);
  if (bound === undefined) return parsed;
  // The refinement sees parsed milliseconds, so the bad value is shown as a duration again.
  return parsed.refine((ms) => (bound.exclusive === true ? ms > bound.minMs : ms >= bound.minMs), {
    error: mustBe(`a duration ${boundText}`, (ms) => formatDuration(Number(ms))),
  });
}

export const durationSchema = duration();
