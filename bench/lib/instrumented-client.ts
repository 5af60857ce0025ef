import { PrefetchingThrottler, type Clock, type QuotaRemote } from "@sluice/core";
import type { QuotaServiceClient } from "@sluice/protocol";
import { RetryingQuotaRemote, prefetchWindow } from "@sluice/client";
import type { ThrottlerSpec } from "@sluice/spec";

/**
 * A job's throttler client built exactly as DistributedThrottlerFactory builds it (a
 * PrefetchingThrottler over a RetryingQuotaRemote), with the RPCs counted and the local pool read
 * after every refill — the only moment it grows — so the largest pool is its true maximum.
 */
export class InstrumentedClient {
  readonly throttler: PrefetchingThrottler;
  rpcs = 0;
  /** Granted and not yet handed to a caller, right after each refill landed and waiting callers took theirs. */
  maxAvailable = 0;
  /** Available plus requested-but-not-yet-granted: what the client has claimed at once. */
  maxClaimed = 0;

  constructor(options: {
    readonly client: () => QuotaServiceClient;
    readonly throttlerId: string;
    readonly clientId: string;
    readonly spec: ThrottlerSpec;
    readonly clock: Clock;
    readonly classId?: string;
    readonly priority?: () => number;
  }) {
    const retrying = new RetryingQuotaRemote({
      client: options.client,
      throttlerId: options.throttlerId,
      clientId: options.clientId,
      spec: options.spec,
      priority: options.priority ?? (() => 0),
      classId: () => options.classId ?? "",
      clock: options.clock,
      onRpc: () => {
        this.rpcs += 1;
      },
    });
    const remote: QuotaRemote = {
      acquire: (amount, signal) => {
        const granted = retrying.acquire(amount, signal);
        // Registered before the throttler's own handler, so this runs first and queues the read
        // for after the throttler has added the refill to its pool and served its waiting callers.
        granted.then(
          () => queueMicrotask(() => this.sample()),
          () => {},
        );
        return granted;
      },
      release: (amount) => retrying.release(amount),
    };
    this.throttler = new PrefetchingThrottler(prefetchWindow(options.spec), remote, options.clock, options.throttlerId);
  }

  private sample(): void {
    const stats = this.throttler.stats();
    this.maxAvailable = Math.max(this.maxAvailable, stats.available);
    this.maxClaimed = Math.max(this.maxClaimed, stats.available + stats.inFlight);
  }
}
