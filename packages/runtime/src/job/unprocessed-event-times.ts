import type { RecordReader } from "../ports/source.ts";
import { lagTimestamp } from "./lag-timestamp.ts";

/** A stretch of records read and not yet processed; `done()` once processed, dropped or rewound. */
export interface UnprocessedSpan {
  done(): void;
}

const NOTHING_OUTSTANDING: UnprocessedSpan = { done: () => undefined };

interface InputState {
  readonly delayMs: number;
  /** Oldest event time of each outstanding span of this input, by span id. */
  readonly spans: Map<number, number>;
  /** Oldest event time of what the source has fetched for this input but not yet handed over (asked live). */
  readAhead: () => number | undefined;
}

/**
 * What a job has read and not processed, over all of its inputs, reduced to what the lag timestamp
 * needs (docs/design.md §12): per input, the oldest event time among outstanding records — the batch being
 * processed, the iterations of it still to come, and the batches fetched ahead — plus that stream's
 * `stream_delay`. Event times inside a partition need not be in offset order, so it keeps the
 * minimum of each span rather than the first record's time.
 *
 * Pure bookkeeping, no clock: a span's minimum is taken once when it is read, and a span goes away
 * as a whole (an iteration ends, a failure rewinds, a partition is revoked), so each operation costs
 * O(outstanding spans), which the read window bounds to a handful.
 */
export class UnprocessedEventTimes {
  private readonly inputs = new Map<string, InputState>();
  private nextSpanId = 0;

  /**
   * Records of `input` (one stream partition) that were read and wait to be processed.
   * An empty span holds nothing back; a record without a usable time (≤ 0, NaN) is ignored.
   */
  read(input: string, streamDelayMs: number, eventTimesMs: Iterable<number>): UnprocessedSpan {
    let oldest = Number.POSITIVE_INFINITY;
    for (const t of eventTimesMs) if (Number.isFinite(t) && t > 0 && t < oldest) oldest = t;
    return this.outstanding(input, streamDelayMs, oldest);
  }

  /**
   * As `read`, from the records themselves through their reader: a job's every iteration, without
   * an array of their times.
   */
  readRecords<R>(input: string, streamDelayMs: number, records: readonly R[], reader: Pick<RecordReader<R>, "timestampMs">): UnprocessedSpan {
    let oldest = Number.POSITIVE_INFINITY;
    for (const record of records) {
      const t = reader.timestampMs(record);
      if (Number.isFinite(t) && t > 0 && t < oldest) oldest = t;
    }
    return this.outstanding(input, streamDelayMs, oldest);
  }

  private outstanding(input: string, streamDelayMs: number, oldest: number): UnprocessedSpan {
    if (oldest === Number.POSITIVE_INFINITY) return NOTHING_OUTSTANDING;
    const state = this.input(input, streamDelayMs);
    const id = this.nextSpanId++;
    state.spans.set(id, oldest);
    return { done: () => void state.spans.delete(id) };
  }

  /**
   * How to ask the source for the oldest event time it holds for `input` beyond the batches it
   * handed over (undefined: nothing). Asked at each lagTimestamp(), so it is never stale.
   */
  watchReadAhead(input: string, streamDelayMs: number, oldestMs: () => number | undefined): void {
    this.input(input, streamDelayMs).readAhead = oldestMs;
  }

  /** The input is no longer read here (revoked, stopped): it holds nothing back any more. */
  forget(input: string): void {
    this.inputs.delete(input);
  }

  /**
   * The minimum over inputs of (oldest outstanding event time + that input's stream_delay); 0 when
   * nothing is outstanding anywhere, which the controller serves first ("no information yet").
   * An input with nothing outstanding does not hold the others back.
   */
  lagTimestamp(): number {
    let best = Number.POSITIVE_INFINITY;
    for (const state of this.inputs.values()) {
      const ahead = state.readAhead();
      let oldest = ahead !== undefined && Number.isFinite(ahead) && ahead > 0 ? ahead : Number.POSITIVE_INFINITY;
      for (const t of state.spans.values()) if (t < oldest) oldest = t;
      if (oldest === Number.POSITIVE_INFINITY) continue;
      const key = lagTimestamp(oldest, state.delayMs);
      if (key < best) best = key;
    }
    return best === Number.POSITIVE_INFINITY ? 0 : best;
  }

  private input(input: string, delayMs: number): InputState {
    let state = this.inputs.get(input);
    if (!state) {
      state = { delayMs, spans: new Map(), readAhead: () => undefined };
      this.inputs.set(input, state);
    }
    return state;
  }
}
