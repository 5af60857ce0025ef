import { context, ROOT_CONTEXT, type Context } from "@opentelemetry/api";
import { RESOLVED, SluiceError, WaitHistogram, type Clock, type ThrottleOptions, type Throttler, type WaitHistogramView } from "@sluice/core";

export interface ThrottlerHandleMetrics {
  readonly throttlerId: string;
  /** Units handed to callers (the reference's worker sensor `consumed`). */
  readonly consumed: number;
  readonly released: number;
  /** Prefetched units the client handed back to the controller: a pool's excess, or the pool on close. */
  readonly returned: number;
  /** Time callers waited in throttle() when the local pool could not answer at once. */
  readonly waitTime: WaitHistogramView;
  readonly rpcCount: number;
  readonly rpcFailures: number;
}

/**
 * What `ctx.getThrottlerOrThrow(id)` returns: a handle that stays valid across reconfiguration. The
 * client behind it may be swapped (its config changed) or detached (the throttler was removed from
 * dynamic_spec; calls then fail with THROTTLER_NOT_DECLARED until it is declared again). Once its
 * owner stops (the job ended), calls fail with CANCELLED saying so.
 */
export class ThrottlerHandle implements Throttler {
  private current: Throttler | null = null;
  private stoppedWith: SluiceError | null = null;
  private consumed = 0;
  private released = 0;
  private returned = 0;
  private readonly waits = new WaitHistogram();
  private lastCaller: Context = ROOT_CONTEXT;
  rpcCount = 0;
  rpcFailures = 0;

  constructor(
    readonly throttlerId: string,
    private readonly computation: string,
    private readonly clock: Clock,
  ) {}

  get attached(): boolean {
    return this.current !== null;
  }

  attach(client: Throttler | null): void {
    if (this.stoppedWith) return;
    this.current = client;
  }

  /** Detaches for good: the owner of this handle stopped for `reason` (e.g. "job w1/Enricher/0 stopped"). */
  stop(reason: string): void {
    this.current = null;
    this.stoppedWith ??= new SluiceError(
      "CANCELLED",
      `throttler "${this.throttlerId}" (computation "${this.computation}"): ${reason}; this handle no longer serves calls ` +
        "(take a new one from the context of a running job)",
      { throttlerId: this.throttlerId, computation: this.computation },
    );
  }

  /**
   * The trace context of the latest throttle()/tryAcquire() caller: the parent of the controller's
   * RequestQuota span. A refill sent synchronously by a call that missed the pool gets that call's
   * own context. One sent later from a callback (the refill kept queued while callers outrun the
   * pool, a retry after a failure) goes to the latest caller, whose demand it follows — not to
   * whatever context the refill's promise chain captured: with AsyncLocalStorage that is the caller
   * that started the chain, so every refill of a busy job would pile up under its first iteration.
   */
  get callerContext(): Context {
    return this.lastCaller;
  }

  throttle(amount: number, options?: ThrottleOptions): Promise<void> {
    const client = this.current;
    if (client === null) return Promise.reject(this.unavailable());
    this.lastCaller = context.active();
    const pending = client.throttle(amount, options);
    if (pending === RESOLVED) {
      // Fast path: the pool answered; no timer, no allocation.
      this.consumed += amount;
      return RESOLVED;
    }
    const startedAt = this.clock.now();
    return pending.then(() => {
      this.consumed += amount;
      this.waits.record(this.clock.now() - startedAt);
    });
  }

  tryAcquire(amount: number): boolean {
    const client = this.current;
    if (client === null) throw this.unavailable();
    this.lastCaller = context.active();
    const taken = client.tryAcquire(amount);
    if (taken) this.consumed += amount;
    return taken;
  }

  release(amount: number): void {
    const client = this.current;
    if (client === null) throw this.unavailable();
    client.release(amount);
    this.released += amount;
  }

  recordReturned(amount: number): void {
    this.returned += amount;
  }

  metrics(): ThrottlerHandleMetrics {
    return {
      throttlerId: this.throttlerId,
      consumed: this.consumed,
      released: this.released,
      returned: this.returned,
      waitTime: this.waits.view(),
      rpcCount: this.rpcCount,
      rpcFailures: this.rpcFailures,
    };
  }

  private unavailable(): SluiceError {
    if (this.stoppedWith) return this.stoppedWith;
    return new SluiceError(
      "THROTTLER_NOT_DECLARED",
      `throttler "${this.throttlerId}" is no longer declared in dynamic_spec.throttlers (computation "${this.computation}"); ` +
        "add it back with `sluice reconfigure` and this handle works again",
      { throttlerId: this.throttlerId, computation: this.computation },
    );
  }
}
