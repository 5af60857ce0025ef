/**
 * Shaping on the controller (docs/design.md §11.1, `smooth`): one cursor per smooth throttler hands out
 * *slots* on a single timeline, GCRA-like. A grant of n units gets the slots
 * `start, start + 1/r, …, start + (n−1)/r` with `start = max(now, cursor)`, and the cursor moves to
 * `start + n/r`. Slots never overlap, whoever they go to, so the sum over every client is spaced
 * exactly 1/r apart on the controller's clock; each client hands unit i out at its slot (measured
 * from when the answer reached it), never earlier — see PacedThrottler.
 *
 * The guarantee — at most `limit × period` units in every *closed* window of length `period` — needs
 * a margin: slots exactly 1/limit apart put `limit × period + 1` of them in a closed window, and a
 * client that receives its answer later than another shifts its slots later. Pacing at
 * `r = SMOOTH_RATE_FRACTION × limit` leaves room for `smoothToleranceMs(period)` of such shift:
 * a window of length `period` then sees slots from a span of at most `period + tolerance`, which
 * holds fewer than `limit × period` gaps of 1/r.
 *
 * A pure value: every method takes `now` in ms.
 */

/** The paced rate as a share of the limit: a backlogged smooth throttler delivers 96 % of `limit`. */
export const SMOOTH_RATE_FRACTION = 0.96;

/**
 * How late a unit may reach its caller relative to the slot the controller planned (response
 * latency differences between clients, timer lateness, a unit left in a pool) with the window
 * bound still holding: slots from `period + tolerance` must number fewer than `limit × period`
 * gaps, i.e. `(period + tolerance) × r < limit × period`. 41.7 ms for a period of 1 s.
 */
export function smoothToleranceMs(periodMs: number): number {
  return periodMs * (1 / SMOOTH_RATE_FRACTION - 1);
}

/**
 * How late a unit may reach its caller against the slot the controller planned, all told: how far
 * the client's placing of the answer's slots may be off (the width of its bound on the controller's
 * clock, ControllerClockBound, or without one the answer's travel; SlotSchedule.add subtracts it)
 * plus how long the unit then waited in the client. Past it the unit expires (unused slots are never
 * reissued, so they cannot burst later). What the tolerance leaves after the dispatch guard and 5 %
 * for the bound's own error (the controller's wait travels in whole ms, rounded down): 29.2 ms at a
 * period of 1 s.
 */
export function slotExpiryMs(periodMs: number): number {
  const tolerance = smoothToleranceMs(periodMs);
  return Math.max(0, tolerance * 0.95 - smoothDispatchGuardMs(periodMs));
}

/**
 * The dispatch guard: kept of the tolerance, at any period, for what happens between `throttle()`
 * returning and the caller's call reaching the protected system (the rest of the task that handed
 * the unit out, the caller's own continuation, its request on the way). Only its *variation* counts:
 * a delay every call has shifts the calls together. A quarter of the tolerance, at least
 * CALLER_DELAY_MARGIN_MS: 10.4 ms at a period of 1 s (a caller whose calls land up to 10 ms apart
 * in their delays still never puts `limit × period + 1` calls in a closed window), 1.5 ms at 100 ms.
 */
export function smoothDispatchGuardMs(periodMs: number): number {
  return Math.max(CALLER_DELAY_MARGIN_MS, smoothToleranceMs(periodMs) * SMOOTH_DISPATCH_GUARD_SHARE);
}

/** The dispatch guard's share of the tolerance (see smoothDispatchGuardMs). */
export const SMOOTH_DISPATCH_GUARD_SHARE = 0.25;

/**
 * The least dispatch guard at any period: at short periods a quarter of the tolerance is below the
 * jitter between `throttle()` returning and a call landing (docs/internals/smooth-shaping.md).
 */
export const CALLER_DELAY_MARGIN_MS = 1.5;

export interface PaceConfig {
  /** The limit in force (units/s); null = unlimited (nothing to pace: grants go out at once). */
  readonly limit: number | null;
  /** The clients' request_period: how far ahead of their slots they may hold a schedule. */
  readonly requestPeriodMs: number;
}

export interface PaceSlots {
  /** The first slot, on the controller's clock. */
  readonly startAt: number;
  /** Spacing of the slots in ms (1000 / r); 0 when unlimited (all units at `startAt`). */
  readonly intervalMs: number;
}

export function pacedRateOf(limit: number | null): number | null {
  return limit === null ? null : limit * SMOOTH_RATE_FRACTION;
}

/**
 * How far ahead of its first slot a grant is answered. A little lead lets the answer travel before
 * its first slot (a controller timer that fires late would otherwise leave a gap in the timeline);
 * it does not weaken the guarantee, since clients shift slots by their own receipt time.
 */
export function paceLeadMs(config: PaceConfig): number {
  return Math.min(config.requestPeriodMs / 4, 250);
}

/**
 * The longest stretch of time one smooth answer covers. A starting controller grants nothing for one
 * reach (its predecessor's clients may hold slots that far ahead), and the reach is one answer long:
 * an answer as long as the default request_period of 5 s would stop every start for 5 s. Capped at a
 * second, a client whose share of the rate needs more asks more often than once per request_period
 * (at most about once a second). The client sizes its smooth answers by it (smoothPrefetchWindow in @sluice/client).
 */
export const SMOOTH_MAX_ANSWER_SPAN_MS = 1_000;

/**
 * The largest answer a smooth client asks for: `ceil(limit × min(request_period, 1 s))` (its
 * prefetch cap; a larger deficit is asked for in several requests).
 */
export function maxPacedAnswer(config: PaceConfig): number {
  if (config.limit === null) return Number.POSITIVE_INFINITY;
  return Math.max(1, Math.ceil((config.limit * Math.min(config.requestPeriodMs, SMOOTH_MAX_ANSWER_SPAN_MS)) / 1000));
}

/**
 * How far past `now` the slots already answered may reach: the lead plus the longest answer. A
 * controller that starts (after a restart, its predecessor's clients may still hold slots up to
 * this far) or that turns smooth on starts its cursor this far ahead.
 */
export function paceReachMs(config: PaceConfig): number {
  const rate = pacedRateOf(config.limit);
  if (rate === null || rate <= 0) return 0;
  return paceLeadMs(config) + (maxPacedAnswer(config) * 1000) / rate;
}

export class PaceCursor {
  private config: PaceConfig;
  /** The first free slot. Only ever moves forward: slots answered are spent, used or not. */
  private cursorAt: number;

  constructor(config: PaceConfig, now: number) {
    this.config = config;
    this.cursorAt = now + paceReachMs(config);
  }

  get nextSlotAt(): number {
    return this.cursorAt;
  }

  get rate(): number | null {
    return pacedRateOf(this.config.limit);
  }

  /** Whether a grant may be answered now: its first slot begins within the lead. */
  canAnswer(now: number): boolean {
    const rate = this.rate;
    if (rate === null) return true;
    if (rate <= 0) return false;
    return this.cursorAt <= now + paceLeadMs(this.config);
  }

  /** Milliseconds until `canAnswer` holds: 0 if now, null if never (limit 0). */
  msUntilAnswerable(now: number): number | null {
    const rate = this.rate;
    if (rate === null) return 0;
    if (rate <= 0) return null;
    return Math.max(0, this.cursorAt - paceLeadMs(this.config) - now);
  }

  /** Takes the next `amount` slots; call only when `canAnswer(now)`. */
  reserve(amount: number, now: number): PaceSlots {
    const rate = this.rate;
    if (rate === null || rate <= 0) return { startAt: now, intervalMs: 0 };
    const startAt = Math.max(now, this.cursorAt);
    const intervalMs = 1000 / rate;
    this.cursorAt = startAt + amount * intervalMs;
    return { startAt, intervalMs };
  }

  /**
   * A new limit or request_period applies to slots not yet answered; the cursor keeps its place, so
   * slots already answered at the old rate are never overlapped by new ones.
   */
  reconfigure(config: PaceConfig): void {
    this.config = config;
  }

  /** Smoothing was just turned on: slots handed out before (unpaced) may still be in pools. */
  restartAt(now: number): void {
    this.cursorAt = Math.max(this.cursorAt, now + paceReachMs(this.config));
  }
}
