// The control law of an adaptive limit (docs/design.md §11.3), as a pure function: (state, reading, usage)
// → the next limit and why. The loop in adaptive-loop.ts does the waiting, reading and applying.
//
// The law (docs/guides/adaptive.md explains it to operators):
//   mid = (low + high) / 2, use = what the throttler actually handed out during the last interval
//   (units/s for a rate throttler; units in use now for a concurrency throttler, or the limit
//   itself when a request waits: the limit binds there, and the use read at one instant is short
//   of it by the tasks that just ended).
//   capacity lost        a reading beyond the near zone above the band that follows a steady one
//                        (inside the band, or just above it, with no raise before it): cut to
//                        shown × MAX_CUT at once,
//                        shown = the use at the decision before (what the reading's window shows);
//                        then hold on readings above the band while they cannot show that cut yet
//                        (the first one after it) or are falling (the cut is coming through)
//   load > high          cut:   limit' = max(limit × MAX_CUT, min(limit, use) × (mid / load)^CUT_EXPONENT),
//                               and at most limit × SATURATED_CUT when the reading is saturated (≥ 0.99)
//                               (a saturated reading right after a cut, or after a raise that landed
//                               inside the band, cuts to ×0.8)
//   load < low, demand   raise: limit' = min(limit × MAX_RAISE, shown × mid / load, use × MAX_RAISE + MIN_RAISE_STEP),
//                               shown = use, or right after a raise the use at the decision before
//                               (the use the reading still shows)
//   near the band        a reading just outside it (below: [low − w, low), above: (high, high + w/2],
//                        w = high − low, never a saturated one) moves the limit by
//                        a small step: one unit (concurrency) or half way in ratio,
//                        limit' = base × (mid / load)^0.5 — a cut at once, a raise only when the
//                        reading before was below the band too
//   low ≤ load ≤ high    hold; in whole units, two readings in a row in the outer quarter of the
//                        band on the same side move one unit towards the middle
//   no demand            hold (nobody is asking for more: raising would only bank headroom)
//   bad reading          hold; after FALLBACK_AFTER_FAILURES in a row: min_limit
//   and always within [min_limit, max_limit].
//
// Why it has this shape and does not oscillate (the band as a dead zone, steps near it narrower than
// its middle, raises that scale the use a lagging reading still shows, steeper cuts because a CPU
// reading saturates, one cut on a loss of capacity and then a hold until a reading can show it):
// docs/internals/adaptive-law.md, with the figures of test/simulation/adaptive-law-cluster-sim.test.ts.

import type { AdaptiveLawState } from "@sluice/failover-ports";

export const ADAPTIVE_LAW = Object.freeze({
  /** Largest raise per interval: ×1.5. */
  maxRaise: 1.5,
  /** Headroom above use, in units, that a raise may always reach: a throttler used at 0.4/s can still go to 1.6/s. */
  minRaiseStep: 1,
  /** Largest cut per interval: halve. */
  maxCut: 0.5,
  /** Cuts follow (mid / load)^2. */
  cutExponent: 2,
  /**
   * A reading at or above this is saturated: a CPU cannot read more than 1.0, so how far beyond
   * capacity the demand is cannot be known, and the cut is at least to ×saturatedCut.
   */
  saturatedLoad: 0.99,
  saturatedCut: 0.6,
  saturatedCutAfterCut: 0.8,
  /** Use below this share of the limit, with nobody waiting, is "no demand": the limit holds. */
  demandShare: 0.5,
  /**
   * Width of the near zone below and above the band, in band widths: a reading there is as likely
   * noise as a drift, so it moves the limit only a little (and raises only when the one before
   * agreed). Narrower above: a reading well above the band is more often a system that lost
   * capacity than noise, and must cut in proportion.
   */
  nearBelowWidths: 1,
  nearAboveWidths: 0.5,
  /** The step in the near zone: (mid / load)^0.5 of use (rate throttlers); one unit (concurrency). */
  nearExponent: 0.5,
  /**
   * Inside the band, the outer share of its width on either side: two readings in a row there, on
   * the same side, move the limit one unit (concurrency) towards the middle. A limit whose load
   * sits at an edge of the band is thrown out of it by every reading's noise; one unit (here 1.5 %
   * of the load) is less than the middle's width (half the band), so the move cannot cross it.
   */
  edgeWidths: 0.25,
  /**
   * At most this many readings above the band hold after a capacity-loss cut: by then a reading's
   * window (the example's: 4 s + 1 s late, 2.5 intervals) lies after the cut, and a slowly falling
   * overload must not hold the limit for ever.
   */
  lossHoldReadings: 2,
  /** Consecutive failed readings after which the limit falls to min_limit. */
  fallbackAfterFailures: 3,
});

export interface AdaptiveBounds {
  readonly low: number;
  readonly high: number;
  readonly minLimit: number;
  readonly maxLimit: number;
  /**
   * Concurrency throttlers admit whole units: a limit of 15.9 admits 15 tasks. A raise then goes to
   * the nearest whole number, one unit more at least, and a cut to a whole number below, or a limit could creep by
   * fractions for ever without admitting one more task.
   */
  readonly wholeUnits?: boolean;
}

export type LoadReading = { readonly ok: true; readonly load: number } | { readonly ok: false; readonly reason: string };

export interface ThrottlerUsage {
  /** What the throttler handed out over the last interval: units per second for a rate throttler. */
  readonly use: number;
  /** Whether some request waited in the queue during the interval. */
  readonly queued: boolean;
}

export type AdaptiveAction = "raise" | "cut" | "hold" | "fallback";

export interface AdaptiveDecision {
  readonly state: AdaptiveLawState;
  readonly action: AdaptiveAction;
  /** One clause a person reads in the log line: why this action. */
  readonly reason: string;
}

/** Two decimals: limits are shown and compared as people read them. */
function roundLimit(limit: number): number {
  return Math.round(limit * 100) / 100;
}

function clamp(value: number, bounds: AdaptiveBounds): number {
  return Math.min(bounds.maxLimit, Math.max(bounds.minLimit, value));
}

const fmt = (n: number) => String(Math.round(n * 1000) / 1000);

export function initialLawState(limit: number, bounds: AdaptiveBounds): AdaptiveLawState {
  return { limit: clamp(limit, bounds), failures: 0, raisedLast: false };
}

export function decideLimit(state: AdaptiveLawState, reading: LoadReading, usage: ThrottlerUsage, bounds: AdaptiveBounds): AdaptiveDecision {
  const decision = decide(state, reading, usage, bounds);
  if (!reading.ok) return decision;
  return { ...decision, state: { ...decision.state, lastUse: raiseBase(state.limit, Math.max(0, usage.use), usage, bounds), lastLoad: reading.load } };
}

function decide(state: AdaptiveLawState, reading: LoadReading, usage: ThrottlerUsage, bounds: AdaptiveBounds): AdaptiveDecision {
  const limit = clamp(state.limit, bounds);
  if (!reading.ok) {
    const failures = state.failures + 1;
    if (failures >= ADAPTIVE_LAW.fallbackAfterFailures && limit !== bounds.minLimit) {
      return {
        state: { limit: bounds.minLimit, failures, raisedLast: false },
        action: "fallback",
        reason: `${failures} failed readings in a row (${reading.reason}): falling back to min_limit`,
      };
    }
    return { state: { limit, failures, raisedLast: false }, action: "hold", reason: `no usable reading (${reading.reason}; ${failures} in a row)` };
  }
  const { load } = reading;
  const mid = (bounds.low + bounds.high) / 2;
  const band = `[${fmt(bounds.low)}, ${fmt(bounds.high)}]`;
  const use = Math.max(0, usage.use);
  const lost = load > bounds.high ? lossCut(state, limit, load, use, bounds) : undefined;
  if (lost) return lost;
  const near = nearBand(state, limit, load, use, usage, bounds);
  if (near) return near;
  if (load > bounds.high) {
    let fromUse = Math.min(limit, use) * (mid / load) ** ADAPTIVE_LAW.cutExponent;
    // Right after a cut the reading still shows part of the work admitted before it, so a second
    // saturated reading cuts less (×0.8) than the first (×0.6).
    const saturated = load >= ADAPTIVE_LAW.saturatedLoad && bounds.high < ADAPTIVE_LAW.saturatedLoad;
    // So does one right after a raise landed inside the band (slow start's last step still starting
    // up: the overload cannot be far beyond the band). Not after a long hold in the band: then a
    // saturated reading means the system changed (lost capacity), and the full cut applies.
    const saturatedCut = state.cutLast === true || state.inBandAfterRaise === true ? ADAPTIVE_LAW.saturatedCutAfterCut : ADAPTIVE_LAW.saturatedCut;
    if (saturated) fromUse = Math.min(fromUse, limit * saturatedCut);
    const cut = Math.max(limit * ADAPTIVE_LAW.maxCut, fromUse);
    const next = clamp(bounds.wholeUnits ? Math.floor(cut) : roundLimit(cut), bounds);
    if (next >= limit)
      return { state: { limit, failures: 0, raisedLast: false }, action: "hold", reason: `load ${fmt(load)} above ${band} but already at min_limit` };
    return { state: { limit: next, failures: 0, raisedLast: false, cutLast: true }, action: "cut", reason: `load ${fmt(load)} above ${band}, use ${fmt(use)}` };
  }
  if (load >= bounds.low) return insideBand(state, limit, load, use, usage, bounds);
  const demand = usage.queued || use >= limit * ADAPTIVE_LAW.demandShare;
  if (!demand) {
    return {
      state: { limit, failures: 0, raisedLast: false },
      action: "hold",
      reason: `load ${fmt(load)} below ${band} but no demand (use ${fmt(use)} of limit ${fmt(limit)}, nobody waiting)`,
    };
  }
  const base = raiseBase(limit, use, usage, bounds);
  // Right after a raise the reading still shows the use from before it (the query's window and
  // the scrapes lag the work just admitted): scale what was in use then, not what is now.
  const shown = state.raisedLast && state.lastUse !== undefined ? Math.min(base, state.lastUse) : base;
  const towardsMid = load > 0 ? (shown * mid) / load : Number.POSITIVE_INFINITY;
  const raised = Math.min(limit * ADAPTIVE_LAW.maxRaise, towardsMid, base * ADAPTIVE_LAW.maxRaise + ADAPTIVE_LAW.minRaiseStep);
  const whole = Math.max(Math.round(raised), Math.floor(limit) + 1);
  const next = clamp(bounds.wholeUnits ? (raised > limit ? whole : limit) : roundLimit(raised), bounds);
  if (next <= limit) {
    const why = limit >= bounds.maxLimit ? "already at max_limit" : `use ${fmt(use)} does not call for more`;
    return { state: { limit, failures: 0, raisedLast: false }, action: "hold", reason: `load ${fmt(load)} below ${band} but ${why}` };
  }
  return { state: { limit: next, failures: 0, raisedLast: true }, action: "raise", reason: `load ${fmt(load)} below ${band}, use ${fmt(use)}` };
}

/**
 * A reading inside the band holds — unless it and the one before both sat in the outer quarter of
 * the band on the same side (ADAPTIVE_LAW.edgeWidths) while the limit counts whole units: then one
 * unit towards the middle, if the use says that unit is used (a raise needs demand).
 */
function insideBand(state: AdaptiveLawState, limit: number, load: number, use: number, usage: ThrottlerUsage, bounds: AdaptiveBounds): AdaptiveDecision {
  const band = `[${fmt(bounds.low)}, ${fmt(bounds.high)}]`;
  const edgeWidth = (bounds.high - bounds.low) * ADAPTIVE_LAW.edgeWidths;
  const edge = load < bounds.low + edgeWidth ? "low" : load > bounds.high - edgeWidth ? "high" : undefined;
  const hold: AdaptiveDecision = {
    state: { limit, failures: 0, raisedLast: false, inBandAfterRaise: state.raisedLast, steadyLast: !state.raisedLast, ...(edge ? { edge } : {}) },
    action: "hold",
    reason: `load ${fmt(load)} inside ${band}`,
  };
  if (!bounds.wholeUnits || edge === undefined || state.edge !== edge) return hold;
  const demand = usage.queued || use >= limit * ADAPTIVE_LAW.demandShare;
  const next = clamp(edge === "low" ? limit + 1 : Math.floor(limit) - 1, bounds);
  if ((edge === "low" && (!demand || next <= limit)) || (edge === "high" && next >= limit)) return hold;
  const reason = `load ${fmt(load)} inside ${band} but near its ${edge} edge twice in a row, use ${fmt(use)}: one unit towards the middle`;
  return edge === "low"
    ? { state: { limit: next, failures: 0, raisedLast: true }, action: "raise", reason }
    : { state: { limit: next, failures: 0, raisedLast: false }, action: "cut", reason };
}

/**
 * What a raise scales from: the use — or, for a concurrency throttler with someone waiting, the
 * limit itself. There the limit binds (the units free under it are too few for the next request, or
 * were handed out a moment ago): the use read at one instant is short of it by the tasks that just
 * ended, and scaling from it would hold a limit the load says is too low.
 */
function raiseBase(limit: number, use: number, usage: ThrottlerUsage, bounds: AdaptiveBounds): number {
  return bounds.wholeUnits === true && usage.queued ? Math.max(use, limit) : use;
}

/**
 * A reading just outside the band (nearBelowWidths / nearAboveWidths, not saturated) moves one unit
 * (concurrency) or half way in ratio: above at once, below only on the second reading in a row
 * there (the first holds and remembers its side). Undefined when the reading is elsewhere (the
 * proportional law decides).
 */
function nearBand(
  state: AdaptiveLawState,
  limit: number,
  load: number,
  use: number,
  usage: ThrottlerUsage,
  bounds: AdaptiveBounds,
): AdaptiveDecision | undefined {
  const width = bounds.high - bounds.low;
  const above = load > bounds.high && load <= bounds.high + width * ADAPTIVE_LAW.nearAboveWidths && load < ADAPTIVE_LAW.saturatedLoad;
  const below = load < bounds.low && load >= bounds.low - width * ADAPTIVE_LAW.nearBelowWidths;
  if (!above && !below) return undefined;
  const side = above ? "above" : "below";
  const mid = (bounds.low + bounds.high) / 2;
  const band = `[${fmt(bounds.low)}, ${fmt(bounds.high)}]`;
  const steadyLast = above && !state.raisedLast;
  const hold = (reason: string): AdaptiveDecision => ({ state: { limit, failures: 0, raisedLast: false, near: side, steadyLast }, action: "hold", reason });
  if (below && !(usage.queued || use >= limit * ADAPTIVE_LAW.demandShare)) {
    return hold(`load ${fmt(load)} below ${band} but no demand (use ${fmt(use)} of limit ${fmt(limit)}, nobody waiting)`);
  }
  // Above the band a unit comes off at once (an overload is the error that hurts; cutting a unit
  // too many is repaired two readings later); below it, a raise waits for a second reading.
  if (below && state.near !== side) return hold(`load ${fmt(load)} just ${side} ${band}: waiting for a second reading before moving`);
  const base = above ? Math.min(limit, use) : use;
  const step = base * (mid / load) ** ADAPTIVE_LAW.nearExponent;
  const target = bounds.wholeUnits
    ? above
      ? Math.min(limit, Math.round(base)) - 1
      : Math.max(limit, Math.round(base)) + 1
    : roundLimit(above ? step : Math.min(limit * ADAPTIVE_LAW.maxRaise, step));
  const next = clamp(target, bounds);
  if (above ? next >= limit : next <= limit) {
    const why = above
      ? limit <= bounds.minLimit
        ? "already at min_limit"
        : `use ${fmt(use)} calls for no cut`
      : limit >= bounds.maxLimit
        ? "already at max_limit"
        : `use ${fmt(use)} does not call for more`;
    return hold(`load ${fmt(load)} just ${side} ${band} but ${why}`);
  }
  const reason = `load ${fmt(load)} just ${side} ${band}${below ? " twice in a row" : ""}, use ${fmt(use)}: a small step`;
  return above
    ? // Not cutLast: a one-unit cut does not soften the cut of a saturated reading that follows.
      { state: { limit: next, failures: 0, raisedLast: false, steadyLast }, action: "cut", reason }
    : { state: { limit: next, failures: 0, raisedLast: true }, action: "raise", reason };
}

/**
 * A reading beyond the near zone above the band right after a steady one (inside the band or just
 * above it, no raise before it): the work admitted did not grow, so the system lost capacity — by how much the reading cannot say, since its window
 * still holds scrapes from before the loss and its newest ones read saturated at 1.0 whatever the
 * overload. Cut the steepest the law allows (×maxCut) at once, and then hold on readings above the
 * band while they were scraped mostly before the cut took effect (the first one after it) or are
 * falling (the cut is still coming through): cutting on them again would cut for the same overload
 * twice. Undefined when the rule does not apply.
 */
function lossCut(state: AdaptiveLawState, limit: number, load: number, use: number, bounds: AdaptiveBounds): AdaptiveDecision | undefined {
  const band = `[${fmt(bounds.low)}, ${fmt(bounds.high)}]`;
  const since = state.sinceLossCut;
  const falling = state.lastLoad !== undefined && load < state.lastLoad && since !== undefined && since < ADAPTIVE_LAW.lossHoldReadings;
  if (since === 0 || falling) {
    const why = since === 0 ? "the reading cannot show the last cut yet" : `falling from ${fmt(state.lastLoad ?? load)}: the last cut is still coming through`;
    return {
      state: { limit, failures: 0, raisedLast: false, cutLast: true, sinceLossCut: (since ?? 0) + 1 },
      action: "hold",
      reason: `load ${fmt(load)} above ${band}, but ${why}`,
    };
  }
  const farAbove = load > bounds.high + (bounds.high - bounds.low) * ADAPTIVE_LAW.nearAboveWidths;
  if (state.steadyLast !== true || !farAbove) return undefined;
  // Half of what the reading shows in use (the use at the decision before: the reading lags about
  // one interval), not of the limit now — a one-unit cut on the reading before would otherwise
  // count twice.
  const cut = Math.max(limit, state.lastUse ?? limit) * ADAPTIVE_LAW.maxCut;
  const next = clamp(bounds.wholeUnits ? Math.floor(cut) : roundLimit(cut), bounds);
  if (next >= limit) return undefined;
  return {
    state: { limit: next, failures: 0, raisedLast: false, cutLast: true, sinceLossCut: 0 },
    action: "cut",
    reason: `load ${fmt(load)} above ${band} right after a steady ${fmt(state.lastLoad ?? load)}, use ${fmt(use)}: the system lost capacity`,
  };
}
