import { context, ROOT_CONTEXT, type Context } from "@opentelemetry/api";
import { RESOLVED, SluiceError, type Clock, type ThrottleOptions, type Throttler } from "@sluice/core";
import { checkKey, KeyHandle, type KeyClientLookup } from "./key-handle.ts";
import { ThrottlerMeters, type ThrottlerHandleMetrics } from "./throttler-meters.ts";

export type { ThrottlerHandleMetrics } from "./throttler-meters.ts";

/**
 * What `ctx.getThrottlerOrThrow(id)` returns: a handle that stays valid across reconfiguration. The
 * client behind it may be swapped (its config changed) or detached (the throttler was removed from
 * dynamic_spec; calls then fail with THROTTLER_NOT_DECLARED until it is declared again). Once its
 * owner stops (the job ended), calls fail with CANCELLED saying so.
 */
export class ThrottlerHandle implements Throttler {
  private current: Throttler | null = null;
  private stoppedWith: SluiceError | null = null;
  /** Its sensors; the factory counts RPCs and returned units in them. */
  readonly meters = new ThrottlerMeters();
  private lastCaller: Context = ROOT_CONTEXT;
  /** Set by the owner of a keyed throttler's clients (docs/design.md §11.4); unset, forKey fails naming the throttler. */
  keyClients: KeyClientLookup | null = null;

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
      `throttler "${this.throttlerId}" (computation "${this.computation}"): ${reason}; this handle no longer serves calls`,
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
      this.meters.consumed += amount;
      return RESOLVED;
    }
    const startedAt = this.clock.now();
    return pending.then(() => {
      const now = this.clock.now();
      this.meters.consumed += amount;
      this.meters.waits.record(now - startedAt, now);
    });
  }

  tryAcquire(amount: number): boolean {
    const client = this.current;
    if (client === null) throw this.unavailable();
    this.lastCaller = context.active();
    const taken = client.tryAcquire(amount);
    if (taken) this.meters.consumed += amount;
    return taken;
  }

  release(amount: number): void {
    const client = this.current;
    if (client === null) throw this.unavailable();
    client.release(amount);
    this.meters.released += amount;
  }

  /**
   * A handle on `key`'s own bucket of this keyed throttler (docs/design.md §11.4), stable across
   * reconfiguration. The key is 1 to 256 UTF-8 bytes; a throttler that is not keyed fails naming itself.
   */
  forKey(key: string): KeyHandle {
    const checked = checkKey(this.throttlerId, key);
    const lookup = this.keyClients;
    if (lookup === null) throw this.stoppedWith ?? this.unavailable();
    lookup(checked); // fails now, not at the first call, on a throttler that is not keyed
    return new KeyHandle(this.throttlerId, checked, (k) => {
      const current = this.keyClients;
      if (current === null) throw this.stoppedWith ?? this.unavailable();
      return current(k);
    });
  }

  metrics(): ThrottlerHandleMetrics {
    return this.meters.view(this.throttlerId, this.clock.now());
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
