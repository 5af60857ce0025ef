/**
 * Where the controller's clock stands against this process's, bounded from the answers of smooth
 * throttlers (docs/design.md §11.1). Each answer says when the controller answered (`answeredAt`, its clock)
 * and how long the request had waited there; the request left here before the controller saw it,
 * and the answer arrived here after it left, so the offset θ = controller clock − local clock lies in
 * `[answeredAt − receivedAt, answeredAt − waited − sentAt]`. One answer alone bounds θ to its round
 * trip less the wait; the intersection over many answers is as narrow as the fastest legs seen in
 * each direction (about a millisecond over loopback, even when a loaded machine's round trips take
 * 40–80 ms). A client that places an answer's slots at `controller slot − lower bound` hands each out
 * at most `width` late against the controller's plan, instead of at most the answer's whole travel.
 *
 * Clocks drift: the bound widens by DRIFT_PER_MS of the time since it was narrowed. A sample that
 * does not meet the bound (the controller restarted with another clock, a failover to another
 * machine) replaces it. A pure value: every method takes the local `now`.
 */

import type { PaceSchedule } from "./paced-throttler.ts";

/** How fast two clocks may drift apart: 200 ppm, twice what a cheap crystal is specified for. */
export const DRIFT_PER_MS = 2e-4;

export interface ClockSample {
  /** Local time the request was sent. */
  readonly sentAt: number;
  /** Local time the answer arrived. */
  readonly receivedAt: number;
  /** The controller's time when it answered. */
  readonly answeredAt: number;
  /**
   * How long the request had waited at the controller before `answeredAt`, for this attempt alone;
   * null when that is not known (a retry whose wait counts from an earlier attempt): then only the
   * lower bound, which holds for any answer, is used.
   */
  readonly waitedMs: number | null;
}

export class ControllerClockBound {
  private lo = Number.NEGATIVE_INFINITY;
  private hi = Number.POSITIVE_INFINITY;
  /** Local time the bound was last narrowed: drift widens it from there. */
  private at = 0;

  /** Narrows the bound with one answer; returns the bound now in force. */
  add(sample: ClockSample): { lo: number; hi: number } {
    const lo = sample.answeredAt - sample.receivedAt;
    const claimed = sample.waitedMs === null ? Number.POSITIVE_INFINITY : sample.answeredAt - Math.max(0, sample.waitedMs) - sample.sentAt;
    // A wait longer than the round trip cannot be this attempt's alone: its upper bound is not used.
    const hi = claimed < lo ? Number.POSITIVE_INFINITY : claimed;
    const current = this.bound(sample.receivedAt);
    // Inconsistent with what came before (another controller clock): start over from this answer.
    if (lo > current.hi || hi < current.lo) {
      this.lo = lo;
      this.hi = hi;
    } else {
      this.lo = Math.max(current.lo, lo);
      this.hi = Math.min(current.hi, hi);
    }
    this.at = sample.receivedAt;
    return { lo: this.lo, hi: this.hi };
  }

  /** θ lies in [lo, hi] at local time `now` (infinite until an answer came). */
  bound(now: number): { lo: number; hi: number } {
    const drift = Math.max(0, now - this.at) * DRIFT_PER_MS;
    return { lo: this.lo - drift, hi: this.hi + drift };
  }
}

/** A paced answer as it arrived (the RequestQuota result's fields). */
export interface PacedAnswer {
  /** Units granted: fewer than asked when a smooth answer was capped (PaceSchedule.granted). */
  readonly granted?: number;
  readonly waitedMs: number;
  readonly paceStartDelayMs?: number;
  readonly paceIntervalMs?: number;
  readonly paceAnsweredAtMs?: number;
}

/**
 * An answer's slots on this client's clock. With the controller's answer time, they are placed by
 * the bound on the clocks' offset, at the latest the offset allows (never early), and may be late by
 * the bound's width. Without it (an older controller), they count from the answer's arrival and may
 * be late by its travel: the round trip less the controller's wait (a request re-attached after
 * QUOTA_TIMEOUT reports its whole wait: then 0, the arrival is trusted). `firstAttempt`: a retry's
 * wait counts from its first attempt, so only a first attempt bounds the offset from above.
 */
export function paceScheduleOf(answer: PacedAnswer, bound: ControllerClockBound, sentAt: number, receivedAt: number, firstAttempt: boolean): PaceSchedule {
  const startDelayMs = answer.paceStartDelayMs ?? 0;
  const intervalMs = answer.paceIntervalMs ?? 0;
  const travelMs = Math.max(0, receivedAt - sentAt - answer.waitedMs);
  const granted = answer.granted === undefined ? {} : { granted: answer.granted };
  const answeredAt = answer.paceAnsweredAtMs;
  if (answeredAt === undefined) return { startDelayMs, intervalMs, travelMs, ...granted };
  const { lo, hi } = bound.add({ sentAt, receivedAt, answeredAt, waitedMs: firstAttempt ? answer.waitedMs : null });
  if (!Number.isFinite(hi) || hi - lo >= travelMs) return { startDelayMs, intervalMs, travelMs, ...granted };
  return { startDelayMs: answeredAt + startDelayMs - lo - receivedAt, intervalMs, travelMs: hi - lo, ...granted };
}
