import { SluiceError, type Clock, type ThrottleOptions, type Throttler } from "@sluice/core";
import type { QuotaServiceClient } from "@sluice/protocol";
import type { ThrottlerSpec } from "@sluice/spec";
import type { RetryingQuotaRemote } from "./retrying-quota-remote.ts";

export interface ConcurrencyClientOptions {
  readonly throttlerId: string;
  readonly clientId: string;
  /** Requests and releases units (with the retrying channel's retries and request ids). */
  readonly remote: RetryingQuotaRemote;
  /** The controller connection, looked up per renewal. */
  readonly client: () => QuotaServiceClient;
  readonly clock: Clock;
  /** The throttler's spec in force: lease_timeout and rpc_timeout are read at each renewal. */
  readonly spec: () => Pick<ThrottlerSpec, "lease_timeout" | "rpc_timeout">;
}

/** Renewals per lease_timeout: two may be lost (a slow controller, a GC pause) before a lease ends. */
const RENEWALS_PER_LEASE = 3;

/**
 * A job's client of a concurrency throttler (DESIGN §7.2). Unlike a rate throttler's client it
 * prefetches nothing — a unit held is a task admitted, so holding spare units would admit work
 * nobody is doing — and every throttle() is a RequestQuota for exactly its units. While it holds
 * units it renews their lease every lease_timeout / 3; close() (the job ended) gives them all back.
 */
export class ConcurrencyClient implements Throttler {
  private held = 0;
  private closed = false;
  private renewing: AbortController | null = null;
  /** Requests and releases in flight: while any is, the controller's count and ours may differ for a moment. */
  private busy = 0;
  /** Bumped whenever a request or release starts or ends, so a renewal can tell that none overlapped it. */
  private changes = 0;

  constructor(private readonly options: ConcurrencyClientOptions) {}

  /** Units this client holds now. */
  get heldUnits(): number {
    return this.held;
  }

  get isClosed(): boolean {
    return this.closed;
  }

  async throttle(amount: number, options?: ThrottleOptions): Promise<void> {
    if (this.closed) throw this.closedError();
    if (amount === 0) return;
    const signal = options?.signal ?? new AbortController().signal;
    await this.tracked(this.options.remote.acquire(amount, signal));
    if (this.closed) {
      // Granted while the job was stopping: nobody will use these units.
      void this.tracked(this.options.remote.release(amount));
      throw this.closedError();
    }
    this.held += amount;
    this.startRenewing();
  }

  /** Never takes units without asking the controller: a concurrency client holds no spare units. */
  tryAcquire(_amount: number): boolean {
    return false;
  }

  /** Gives back up to what this client holds (more would free units another holder is using). */
  release(amount: number): void {
    const units = Math.min(Math.max(0, amount), this.held);
    if (units <= 0) return;
    this.held -= units;
    void this.tracked(this.options.remote.release(units));
    if (this.held <= 0) this.stopRenewing();
  }

  /** A replaced client keeps nothing: a concurrency client is only replaced when the kind changes. */
  retire(): void {
    this.close();
  }

  /** The holding job ended: every unit goes back now rather than after lease_timeout. Idempotent. */
  close(): void {
    if (this.closed) return;
    this.closed = true;
    this.stopRenewing();
    const units = this.held;
    this.held = 0;
    if (units > 0) void this.options.remote.release(units);
  }

  private startRenewing(): void {
    if (this.renewing) return;
    const stop = new AbortController();
    this.renewing = stop;
    void this.renewLoop(stop.signal);
  }

  private stopRenewing(): void {
    this.renewing?.abort();
    this.renewing = null;
  }

  private async renewLoop(signal: AbortSignal): Promise<void> {
    const { clock, throttlerId, clientId } = this.options;
    while (!signal.aborted) {
      const spec = this.options.spec();
      try {
        await clock.sleep(spec.lease_timeout / RENEWALS_PER_LEASE, signal);
      } catch {
        return;
      }
      try {
        // Best effort: a lost renewal is retried at the next tick, well before the lease ends.
        const quietSince = this.busy === 0 ? this.changes : null;
        const answer = await this.options.client().renewLeases?.({ clientId, throttlerIds: [throttlerId] }, {
          deadlineAt: clock.now() + Math.min(spec.rpc_timeout, spec.lease_timeout / RENEWALS_PER_LEASE),
          signal,
        });
        if (answer && quietSince !== null && quietSince === this.changes && !signal.aborted) this.giveBackUnheld(answer.held);
      } catch {
        /* the controller is away; the next tick tries again */
      }
    }
  }

  /**
   * The controller counts more units for this client than it holds, with no request or release in
   * flight on either side of the renewal: units it never received (a grant persisted by a leader
   * that died before answering, then given up) or a release that was lost (the controller was away,
   * or a failover came before it was persisted). Left alone they would stay in use for as long as
   * this client renews; they go back now.
   */
  private giveBackUnheld(controllerHeld: number): void {
    const excess = controllerHeld - this.held;
    if (!(excess > 1e-9) || this.closed) return;
    void this.tracked(this.options.remote.release(excess));
  }

  private async tracked<T>(call: Promise<T>): Promise<T> {
    this.busy += 1;
    this.changes += 1;
    try {
      return await call;
    } finally {
      this.busy -= 1;
      this.changes += 1;
    }
  }

  private closedError(): SluiceError {
    return new SluiceError("CANCELLED", `throttler "${this.options.throttlerId}": the job stopped; its units were given back`, {
      throttlerId: this.options.throttlerId,
    });
  }
}
