import { randomUUID } from "node:crypto";
import { context, propagation, type Context } from "@opentelemetry/api";
import {
  asSluiceError,
  cancelledError,
  ControllerClockBound,
  paceScheduleOf,
  SluiceError,
  type Clock,
  type PacedQuotaRemote,
  type PaceSchedule,
  type QuotaRemote,
} from "@sluice/core";
import type { QuotaServiceClient } from "@sluice/protocol";
import type { ThrottlerSpec } from "@sluice/spec";
import { retryBackoffMs } from "./retry-backoff.ts";

/** One RequestQuota attempt as the metrics see it. */
export interface QuotaRpcOutcome {
  readonly throttlerId: string;
  readonly ok: boolean;
  readonly error?: SluiceError;
  readonly latencyMs: number;
}

export interface RetryingQuotaRemoteOptions {
  /** Called per attempt: a restarted controller may come back on a new connection. */
  readonly client: () => QuotaServiceClient;
  readonly throttlerId: string;
  /** Keyed throttlers (docs/design.md §11.4): the key whose bucket this client draws from; absent = not keyed. */
  readonly key?: string;
  readonly clientId: string;
  readonly spec: Pick<ThrottlerSpec, "rpc_timeout" | "retrying_channel">;
  /** Lag timestamp of the job, read when each RPC is sent (docs/design.md §10). */
  readonly priority: () => number;
  /** Quota class for this throttler, read when each RPC is sent (docs/design.md §9.9). */
  readonly classId: () => string;
  /**
   * The trace context each attempt is sent under (W3C `traceparent` in the call's metadata), read
   * when the attempt is sent. Default: the active context.
   */
  readonly traceContext?: () => Context;
  readonly clock: Clock;
  readonly random?: () => number;
  readonly onRpc?: (outcome: QuotaRpcOutcome) => void;
  /** Called with each amount handed back to the controller (ReleaseQuota), before it is sent. */
  readonly onRelease?: (amount: number) => void;
}

/**
 * The "retrying channel" of a throttler client (docs/design.md §9.8): one logical RequestQuota per refill,
 * retried with backoff and jitter under one request id — so the controller grants it once and a
 * retry after a deadline resumes its place in the queue — until `retry_attempts` or `retry_timeout`
 * is spent; then RETRIES_EXHAUSTED, and the job fails. There is no fallback to a local limit.
 */
export class RetryingQuotaRemote implements QuotaRemote, PacedQuotaRemote {
  /**
   * The class the latest granted refill was charged to. Quota already fetched stays with the class it
   * was fetched for (docs/design.md §9.9): what the pool gives back is the latest refills' quota, so a release
   * after a class change refunds the class that paid for it, not the one in force now.
   */
  private chargedClassId: string | null = null;

  constructor(private readonly options: RetryingQuotaRemoteOptions) {}

  async acquire(amount: number, signal: AbortSignal): Promise<void> {
    // A smooth throttler answers at most one reach of slots (a client that is not pacing may still
    // ask it: smooth was just turned on); the rest is asked for again, so this resolves with all.
    // The first request always goes out: the controller refuses NaN, negative and infinite amounts.
    for (let left = amount; ; ) {
      const { granted } = await this.acquirePaced(left, signal);
      if (granted === undefined || !(granted < left)) return;
      left -= granted;
      if (left <= 1e-9 * Math.max(1, amount)) return;
    }
  }

  /**
   * The same call, returning the slots of a smooth throttler's answer (docs/design.md §11.1). The start delay
   * is measured from when the answer arrived here, so a slow answer only shifts the slots later; how
   * much later at most (`travelMs`) is bounded from this attempt's round trip and the controller's wait.
   */
  async acquirePaced(amount: number, signal: AbortSignal): Promise<PaceSchedule> {
    const { clock, spec, throttlerId } = this.options;
    const channel = spec.retrying_channel;
    const requestId = randomUUID();
    const startedAt = clock.now();
    const giveUpAt = startedAt + channel.retry_timeout;
    let lastError: SluiceError | undefined;
    for (let attempt = 1; ; attempt++) {
      const sentAt = clock.now();
      const quotaClassId = this.options.classId();
      try {
        const result = await this.options.client().requestQuota(
          {
            throttlerId,
            clientId: this.options.clientId,
            amount,
            timestampMs: Math.max(0, Math.floor(this.options.priority())),
            quotaClassId,
            requestId,
            ...(this.options.key === undefined ? {} : { key: this.options.key }),
          },
          { deadlineAt: Math.min(sentAt + spec.rpc_timeout, giveUpAt), signal, ...this.traceMetadata() },
        );
        this.chargedClassId = quotaClassId;
        this.options.onRpc?.({ throttlerId, ok: true, latencyMs: clock.now() - sentAt });
        return paceScheduleOf(result, clockBoundOf(this.options.client()), sentAt, clock.now(), attempt === 1);
      } catch (thrown) {
        const error = asSluiceError(thrown, (message) => new SluiceError("CONTROLLER_UNAVAILABLE", message));
        this.options.onRpc?.({ throttlerId, ok: false, error, latencyMs: clock.now() - sentAt });
        if (signal.aborted) throw cancelledError(signal, `quota request "${requestId}" on throttler "${throttlerId}"`);
        if (!error.retriable) throw error;
        lastError = error;
      }
      // A request that timed out while queued is still queued under its id: ask again at once.
      const pause = lastError.code === "QUOTA_TIMEOUT" ? 0 : retryBackoffMs(channel, attempt, this.options.random);
      const elapsed = clock.now() - startedAt;
      if (attempt >= channel.retry_attempts || clock.now() + pause >= giveUpAt) {
        throw new SluiceError(
          "RETRIES_EXHAUSTED",
          `throttler "${throttlerId}": RequestQuota for ${amount} units failed ${attempt} times over ${Math.round(elapsed)} ms ` +
            `(retry_attempts ${channel.retry_attempts}, retry_timeout ${channel.retry_timeout} ms); last error: ${lastError.message}`,
          { throttlerId, amount, attempts: attempt, elapsedMs: elapsed, lastCode: lastError.code },
          { cause: lastError },
        );
      }
      if (pause > 0) {
        try {
          await clock.sleep(pause, signal);
        } catch (thrown) {
          // The caller gave up during the backoff: CANCELLED, like an abort during the call itself.
          if (signal.aborted) throw cancelledError(signal, `quota request "${requestId}" on throttler "${throttlerId}"`);
          throw thrown;
        }
      }
      if (signal.aborted) throw cancelledError(signal, `quota request "${requestId}" on throttler "${throttlerId}"`);
    }
  }

  /**
   * W3C trace context of the waiting caller, so the controller's span is its child (docs/design.md §3).
   * Empty without an SDK: the global propagator is then a no-op and nothing is sent.
   */
  private traceMetadata(): { metadata?: Record<string, string> } {
    const carrier: Record<string, string> = {};
    propagation.inject(this.options.traceContext?.() ?? context.active(), carrier);
    return Object.keys(carrier).length > 0 ? { metadata: carrier } : {};
  }

  /** Best effort: quota that cannot be returned simply expires with the bucket's refill. */
  async release(amount: number): Promise<void> {
    await this.releaseReporting(amount);
  }

  /**
   * The same release, saying whether the controller took it (false: the controller was away, and
   * still counts the units — a concurrency client then renews until it can give them back).
   */
  async releaseReporting(amount: number): Promise<boolean> {
    if (amount <= 0) return true;
    this.options.onRelease?.(amount);
    try {
      await this.options.client().releaseQuota(
        {
          throttlerId: this.options.throttlerId,
          clientId: this.options.clientId,
          amount,
          quotaClassId: this.chargedClassId ?? this.options.classId(),
          ...(this.options.key === undefined ? {} : { key: this.options.key }),
        },
        { deadlineAt: this.options.clock.now() + this.options.spec.rpc_timeout },
      );
      return true;
    } catch {
      return false;
    }
  }
}

/** One bound per connection to a controller: every throttler's answers narrow it (ControllerClockBound). */
const clockBounds = new WeakMap<QuotaServiceClient, ControllerClockBound>();

function clockBoundOf(client: QuotaServiceClient): ControllerClockBound {
  let bound = clockBounds.get(client);
  if (!bound) clockBounds.set(client, (bound = new ControllerClockBound()));
  return bound;
}
