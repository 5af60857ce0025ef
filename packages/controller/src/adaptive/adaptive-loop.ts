import type { Clock } from "@sluice/core";
import { initialLimitOf, type AdaptiveSpec } from "@sluice/spec";
import {
  decideLimit,
  initialLawState,
  type AdaptiveAction,
  type AdaptiveBounds,
  type AdaptiveDecision,
  type LoadReading,
  type ThrottlerUsage,
} from "./adaptive-law.ts";
import type { AdaptiveLawState, PersistedAdaptive } from "@sluice/failover-ports";
import type { LoadSource } from "./load-source.ts";

/** What DescribeThrottlers, /metrics, the dashboard and `sluice top` show of an adaptive throttler. */
export interface AdaptiveSnapshot {
  readonly source: string;
  readonly intervalMs: number;
  readonly dryRun: boolean;
  readonly targetLow: number;
  readonly targetHigh: number;
  readonly minLimit: number;
  readonly maxLimit: number;
  /** The limit the bucket runs at. Under dry_run, where it was when dry_run began (initial_limit from the start). */
  readonly limitInForce: number;
  /** The limit the law decided; equals limitInForce unless dry_run. */
  readonly suggestedLimit: number;
  /** Last good reading, null before the first one or after a failed one. */
  readonly load: number | null;
  /** Clock time of the last decision, ms; null before the first. */
  readonly lastDecisionAt: number | null;
  readonly lastAction: AdaptiveAction | null;
  readonly lastReason: string | null;
  readonly consecutiveFailures: number;
  readonly counters: {
    readonly readings: number;
    readonly failedReadings: number;
    readonly raises: number;
    readonly cuts: number;
    readonly fallbacks: number;
  };
}

export interface AdaptiveLoopOptions {
  readonly throttlerId: string;
  readonly spec: AdaptiveSpec;
  readonly source: LoadSource;
  readonly clock: Clock;
  /** What the throttler handed out since the previous call (the loop calls it once per interval). */
  readonly usage: (elapsedMs: number) => ThrottlerUsage;
  /** Sets the bucket's limit. Called at start, on every change in force, and on reconfiguration. */
  readonly apply: (limit: number) => void;
  readonly log: (line: string) => void;
  /** A concurrency throttler: limits in whole units. */
  readonly wholeUnits?: boolean;
  /** Called after every decision (a failover leader persists the loop's state then). */
  readonly decided?: () => void;
}

function boundsOf(spec: AdaptiveSpec, wholeUnits = false): AdaptiveBounds {
  return { low: spec.target.low, high: spec.target.high, minLimit: spec.min_limit, maxLimit: spec.max_limit, wholeUnits };
}

/**
 * The shell around the control law: every `interval` it reads the load (a reading that takes longer
 * than the interval is stale and counts as failed), asks the law, applies the limit unless dry_run,
 * and logs every change with the reading that caused it.
 */
export class AdaptiveLimitLoop {
  private spec: AdaptiveSpec;
  private source: LoadSource;
  private law: AdaptiveLawState;
  private inForce: number;
  private load: number | null = null;
  private lastDecisionAt: number | null = null;
  private lastAction: AdaptiveAction | null = null;
  private lastReason: string | null = null;
  private readonly counters = { readings: 0, failedReadings: 0, raises: 0, cuts: 0, fallbacks: 0 };
  private readonly stopping = new AbortController();
  private wake = new AbortController();
  private started = false;

  constructor(private readonly options: AdaptiveLoopOptions) {
    this.spec = options.spec;
    this.source = options.source;
    this.law = initialLawState(initialLimitOf(options.spec), boundsOf(options.spec));
    this.inForce = this.law.limit;
  }

  get limitInForce(): number {
    return this.inForce;
  }

  /** Applies initial_limit and starts reading. Idempotent. */
  start(): void {
    if (this.started) return;
    this.started = true;
    this.options.apply(this.inForce);
    this.options.log(
      `adaptive ${this.options.throttlerId}: starting at limit ${this.inForce} (band [${this.spec.target.low}, ${this.spec.target.high}], ` +
        `limits [${this.spec.min_limit}, ${this.spec.max_limit}], every ${this.spec.interval}ms${this.spec.dry_run ? ", dry run" : ""}) from ${this.source.description}`,
    );
    void this.run();
  }

  close(): void {
    this.stopping.abort();
    this.wake.abort();
  }

  /**
   * A live `sluice reconfigure` of `adaptive`: the loop keeps its limit, moved into the new bounds,
   * and goes on with the new band, interval and source. Turning dry_run on freezes the limit in
   * force where it is (the loop only suggests from then on); turning it off puts the suggested
   * limit in force.
   */
  reconfigure(spec: AdaptiveSpec, source: LoadSource): void {
    const previous = this.spec;
    const inForce = this.inForceAfter(spec);
    this.spec = spec;
    this.source = source;
    this.law = initialLawState(this.law.limit, boundsOf(spec));
    if (inForce !== this.inForce || previous.dry_run !== spec.dry_run) {
      this.options.log(
        `adaptive ${this.options.throttlerId}: reconfigured, limit ${this.inForce} -> ${inForce}` +
          `${spec.dry_run ? ` (dry run; suggested ${this.law.limit})` : ""}`,
      );
    }
    this.inForce = inForce;
    this.options.apply(inForce);
    if (previous.interval !== spec.interval) this.wake.abort(); // start the new interval now
  }

  /** The limit in force once `spec` is applied by reconfigure(); pure, so a caller can configure the bucket first. */
  inForceAfter(spec: AdaptiveSpec): number {
    const bounds = boundsOf(spec);
    return initialLawState(spec.dry_run ? this.inForce : this.law.limit, bounds).limit;
  }

  /** The limit a new loop for `spec` puts in force: initial_limit within the bounds. */
  static initialInForce(spec: AdaptiveSpec): number {
    return initialLawState(initialLimitOf(spec), boundsOf(spec)).limit;
  }

  /** What a successor needs to go on from here (see persisted-adaptive.ts). */
  persisted(): PersistedAdaptive {
    return { limitInForce: this.inForce, law: this.law, decidedAtMs: this.lastDecisionAt };
  }

  /**
   * Goes on from a predecessor's state instead of initial_limit: its limit (moved into this spec's
   * bounds), failed readings in a row and slow-start memory. Under dry_run the limit in force is
   * the predecessor's too; otherwise the law's limit is put in force.
   */
  restore(state: PersistedAdaptive): void {
    const bounds = boundsOf(this.spec, this.options.wholeUnits);
    const limit = initialLawState(state.law.limit, bounds).limit;
    this.law = { ...state.law, limit, failures: Math.max(0, Math.floor(state.law.failures)) };
    this.inForce = this.spec.dry_run ? initialLawState(state.limitInForce, bounds).limit : limit;
    this.lastDecisionAt = state.decidedAtMs;
    this.options.apply(this.inForce);
    this.options.log(
      `adaptive ${this.options.throttlerId}: going on from the previous leader's state: limit ${this.inForce}` +
        `${this.spec.dry_run ? ` (dry run; suggested ${limit})` : ""}, ${this.law.failures} failed readings in a row`,
    );
  }

  snapshot(): AdaptiveSnapshot {
    const spec = this.spec;
    return {
      source: this.source.description,
      intervalMs: spec.interval,
      dryRun: spec.dry_run,
      targetLow: spec.target.low,
      targetHigh: spec.target.high,
      minLimit: spec.min_limit,
      maxLimit: spec.max_limit,
      limitInForce: this.inForce,
      suggestedLimit: this.law.limit,
      load: this.load,
      lastDecisionAt: this.lastDecisionAt,
      lastAction: this.lastAction,
      lastReason: this.lastReason,
      consecutiveFailures: this.law.failures,
      counters: { ...this.counters },
    };
  }

  private async run(): Promise<void> {
    const signal = this.stopping.signal;
    let last = this.options.clock.now();
    // Discard what was handed out before the loop started (e.g. the previous fixed limit's traffic).
    this.options.usage(0);
    while (!signal.aborted) {
      try {
        // One controller per sleep that close() and reconfigure() abort: no listener piles up on
        // a long-lived signal (AbortSignal.any would leave one per interval on `stopping`).
        await this.options.clock.sleep(this.spec.interval, this.wake.signal);
      } catch {
        if (signal.aborted) return;
        this.wake = new AbortController();
        continue;
      }
      const reading = await this.readWithin(this.spec.interval, signal);
      if (signal.aborted) return;
      const now = this.options.clock.now();
      const usage = this.options.usage(now - last);
      last = now;
      this.step(reading, usage, now);
    }
  }

  /** The source's reading, or a failed one when it takes longer than `ms` (a stale answer). */
  private async readWithin(ms: number, stop: AbortSignal): Promise<LoadReading> {
    const attempt = new AbortController();
    const onStop = () => attempt.abort();
    stop.addEventListener("abort", onStop, { once: true });
    const timeout = this.options.clock.sleep(ms, attempt.signal).then(
      (): LoadReading => ({ ok: false, reason: `no answer within the interval (${ms}ms): a late reading is stale` }),
      (): LoadReading => ({ ok: false, reason: "stopped" }),
    );
    try {
      return await Promise.race([this.source.read(attempt.signal), timeout]);
    } finally {
      attempt.abort();
      stop.removeEventListener("abort", onStop);
    }
  }

  private step(reading: LoadReading, usage: ThrottlerUsage, now: number): void {
    this.counters.readings++;
    if (!reading.ok) this.counters.failedReadings++;
    this.load = reading.ok ? reading.load : null;
    const before = this.law.limit;
    const decision = decideLimit(this.law, reading, usage, boundsOf(this.spec, this.options.wholeUnits));
    this.law = decision.state;
    this.lastDecisionAt = now;
    this.lastAction = decision.action;
    this.lastReason = decision.reason;
    if (decision.action === "raise") this.counters.raises++;
    if (decision.action === "cut") this.counters.cuts++;
    if (decision.action === "fallback") this.counters.fallbacks++;
    this.logAndApply(decision, reading, before);
    this.options.decided?.();
  }

  private logAndApply(decision: AdaptiveDecision, reading: LoadReading, before: number): void {
    const id = this.options.throttlerId;
    if (decision.action === "hold") {
      // Failed readings are worth a line each (an operator wants to see Prometheus is gone); a
      // steady hold in the band is not.
      if (!reading.ok) this.options.log(`adaptive ${id}: holding limit ${before}: ${decision.reason}`);
      return;
    }
    const dry = this.spec.dry_run;
    this.options.log(
      `adaptive ${id}: ${decision.action} ${dry ? "suggested " : ""}limit ${before} -> ${this.law.limit}: ${decision.reason}` +
        `${dry ? ` (dry run: limit in force stays ${this.inForce})` : ""}`,
    );
    if (dry) return;
    this.inForce = this.law.limit;
    this.options.apply(this.inForce);
  }
}
