import { context, trace, type Attributes, type Span, type Tracer } from "@opentelemetry/api";
import { isSluiceError, RESOLVED, type Clock, type SluiceError, type ThrottleOptions, type Throttler } from "@sluice/core";
import type { DynamicSpec } from "@sluice/spec";
import type { DistributedThrottlerFactory } from "@sluice/client";
import type { ComputationStats } from "./computation-stats.ts";
import { failSpan } from "./fail-span.ts";
import type { SharedLink, SharedLinks } from "./shared-links.ts";

/** Gives back the units an iteration took from concurrency throttlers (docs/design.md §11.2). */
export type GiveBackUnits = () => void;

export const NOTHING_HELD: GiveBackUnits = () => {};

export interface InputThrottleOptions {
  readonly computationName: string;
  readonly throttlers: Pick<DistributedThrottlerFactory, "classIdFor" | "priority" | "getThrottlerOrThrow" | "isConcurrency">;
  /** The dynamic_spec in force now: it names the computation's rows and bytes throttlers. */
  readonly dynamicSpec: () => DynamicSpec;
  /** Default: the global tracer provider's "@sluice/runtime" tracer, as the Worker's. */
  readonly tracer?: Tracer;
  readonly clock: Clock;
  readonly stats: ComputationStats;
}

/**
 * What the throttle waits of one delivered batch's iterations share: the batch's signal, and the
 * signal that stops one throttler's wait when the other's failed (taken on the first iteration that
 * needs it, from the job's SharedLinks: an AbortSignal costs more than the rest of an unlimited
 * throttler's iteration). Sharing it is safe because a failed throttle fails its iteration, a failed
 * iteration ends the batch (the job rewinds), and an aborted link is not handed out again.
 */
export class BatchWaits {
  readonly alone: ThrottleOptions;
  private giveUp: SharedLink | null = null;
  private together: ThrottleOptions | null = null;

  constructor(
    readonly signal: AbortSignal,
    private readonly source: AbortSignal,
    private readonly giveUpLinks: SharedLinks,
  ) {
    this.alone = { signal };
  }

  /** Options for a wait that must stop when its partner's fails. */
  get shared(): ThrottleOptions {
    if (this.together === null) {
      this.giveUp = this.giveUpLinks.enter(this.source);
      this.together = { signal: this.giveUp.signal };
    }
    return this.together;
  }

  /** Stops every wait made with `shared`; the batch ends with `reason`. */
  giveUpAll(reason: unknown): void {
    this.giveUp?.link.abort(reason);
  }

  dispose(): void {
    if (this.giveUp !== null) this.giveUpLinks.leave(this.giveUp);
    this.giveUp = null;
  }
}

/**
 * A job's Input.Throttle (docs/design.md §3): rows and bytes quota asked together, inside the span. When
 * both pools answer at once (the quota does not bind), an iteration costs the span, two calls that
 * return the settled RESOLVED promise, and nothing else: no await, no abort signal, no timer, no
 * second clock read, no wait recorded.
 */
export class InputThrottle {
  private readonly tracer: Tracer;

  constructor(private readonly options: InputThrottleOptions) {
    this.tracer = options.tracer ?? trace.getTracer("@sluice/runtime");
  }

  /**
   * Returns what gives back the units taken from concurrency throttlers (NOTHING_HELD when there are
   * none): at once when both pools answered, else a promise of it once both granted. Rejects (or
   * throws) with the first failure; the other throttler's wait is stopped and what it was granted
   * goes back, so no quota is held by an iteration that will not run.
   */
  acquire(rows: number, bytes: number, waits: BatchWaits): GiveBackUnits | Promise<GiveBackUnits> {
    const { throttlers, computationName } = this.options;
    const entry = this.options.dynamicSpec().computations[computationName];
    const rowsId = entry?.input_rows_throttler_id;
    const bytesId = entry?.input_bytes_throttler_id;
    if ((!rowsId && !bytesId) || rows === 0) {
      // No throttle, no span: an Input.Throttle part that took no time (docs/design.md §15).
      this.options.stats.parts.throttle.recordMs(0);
      return NOTHING_HELD;
    }
    const attributes: Attributes = {};
    if (rowsId) {
      attributes["sluice.throttle.rows.throttler_id"] = rowsId;
      attributes["sluice.throttle.rows.class_id"] = throttlers.classIdFor(rowsId) || "default";
      attributes["sluice.throttle.rows.amount"] = rows;
    }
    if (bytesId) {
      attributes["sluice.throttle.bytes.throttler_id"] = bytesId;
      attributes["sluice.throttle.bytes.class_id"] = throttlers.classIdFor(bytesId) || "default";
      attributes["sluice.throttle.bytes.amount"] = bytes;
    }
    attributes["sluice.throttle.priority_ms"] = throttlers.priority;
    const span = this.tracer.startSpan("Input.Throttle", { attributes });
    const startedAt = this.options.clock.now();
    let rowsThrottler: Throttler | null;
    let bytesThrottler: Throttler | null;
    try {
      rowsThrottler = rowsId ? throttlers.getThrottlerOrThrow(rowsId) : null;
      bytesThrottler = bytesId ? throttlers.getThrottlerOrThrow(bytesId) : null;
    } catch (error) {
      this.endSpan(span, startedAt, error);
      throw error;
    }
    const options = rowsThrottler && bytesThrottler ? waits.shared : waits.alone;
    let rowsWait: Promise<void> = RESOLVED;
    let bytesWait: Promise<void> = RESOLVED;
    // Asked inside the span: a throttle() that misses the pool sends its refill RPC right here,
    // and the RPC carries the active context, so the controller's span becomes this one's child.
    // A span that records nothing (no tracing SDK, or sampled out) would only hand on the trace
    // its parent is already in, so neither the context (a copy of the active one) nor the closure
    // is made for it.
    if (span.isRecording()) {
      context.with(trace.setSpan(context.active(), span), () => {
        if (rowsThrottler) rowsWait = throttleOf(rowsThrottler, rows, options);
        if (bytesThrottler) bytesWait = throttleOf(bytesThrottler, bytes, options);
      });
    } else {
      if (rowsThrottler) rowsWait = throttleOf(rowsThrottler, rows, options);
      if (bytesThrottler) bytesWait = throttleOf(bytesThrottler, bytes, options);
    }
    const giveBack = this.giveBack(rowsThrottler, rowsId, rows, bytesThrottler, bytesId, bytes);
    if (rowsWait === RESOLVED && bytesWait === RESOLVED) {
      span.setAttribute("sluice.throttle.wait_ms", 0);
      this.options.stats.parts.throttle.recordMs(0);
      span.end();
      return giveBack;
    }
    return this.waitTogether(
      [
        [rowsThrottler, rows, rowsWait],
        [bytesThrottler, bytes, bytesWait],
      ],
      waits,
    ).then(
      () => {
        this.endSpan(span, startedAt, undefined);
        return giveBack;
      },
      (error: unknown) => {
        this.endSpan(span, startedAt, error);
        throw error;
      },
    );
  }

  /** Both waits; if one fails, the other stops and what either was granted goes back. */
  private async waitTogether(asks: readonly (readonly [Throttler | null, number, Promise<void>])[], waits: BatchWaits): Promise<void> {
    const granted: (readonly [Throttler, number])[] = [];
    const tracked = asks.map(async ([throttler, amount, wait]) => {
      await wait;
      if (throttler) granted.push([throttler, amount]);
    });
    try {
      await Promise.all(tracked);
    } catch (error) {
      waits.giveUpAll(error);
      await Promise.allSettled(tracked);
      for (const [throttler, amount] of granted) throttler.release(amount);
      throw error;
    }
  }

  private endSpan(span: Span, startedAt: number, error: unknown): void {
    if (error !== undefined) failSpan(span, error);
    const now = this.options.clock.now();
    const waitedMs = now - startedAt;
    span.setAttribute("sluice.throttle.wait_ms", waitedMs);
    this.options.stats.recordThrottleWait(waitedMs, now);
    // The part is the span's own measurement, sluice.throttle.wait_ms (docs/design.md §15).
    this.options.stats.parts.throttle.recordMs(waitedMs);
    span.end();
  }

  /** docs/design.md §11.2: a concurrency throttler's units are the batch in flight, held until its outputs are acknowledged. */
  private giveBack(
    rowsThrottler: Throttler | null,
    rowsId: string | undefined,
    rows: number,
    bytesThrottler: Throttler | null,
    bytesId: string | undefined,
    bytes: number,
  ): GiveBackUnits {
    const { throttlers } = this.options;
    const rowsHeld = rowsThrottler !== null && rowsId !== undefined && throttlers.isConcurrency(rowsId) ? rowsThrottler : null;
    const bytesHeld = bytesThrottler !== null && bytesId !== undefined && throttlers.isConcurrency(bytesId) ? bytesThrottler : null;
    if (rowsHeld === null && bytesHeld === null) return NOTHING_HELD;
    return () => {
      const rowsLost = rowsHeld ? giveBackTo(rowsHeld, rows) : null;
      const bytesLost = bytesHeld ? giveBackTo(bytesHeld, bytes) : null;
      // docs/design.md §5.3: the controller stopped counting the batch's units (a stall past lease_timeout):
      // the iteration fails rather than commit work nobody accounted for; the job redoes it after its backoff.
      const lost = rowsLost ?? bytesLost;
      if (lost) throw lost;
    };
  }
}

/** A throttle() that throws instead of rejecting still fails as a rejection, so its partner's grant goes back. */
function throttleOf(throttler: Throttler, amount: number, options: ThrottleOptions): Promise<void> {
  try {
    return throttler.throttle(amount, options);
  } catch (error) {
    return Promise.reject(error);
  }
}

/** Gives the units back; returns the LEASE_EXPIRED the release failed with, if it did. */
function giveBackTo(throttler: Throttler, amount: number): SluiceError | null {
  try {
    throttler.release(amount);
  } catch (error) {
    if (isSluiceError(error, "LEASE_EXPIRED")) return error;
    // The throttler was removed meanwhile: its client gave its units back when it was detached.
  }
  return null;
}
