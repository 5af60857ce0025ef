import { SluiceError, type Clock, type ThrottleOptions, type Throttler } from "@sluice/core";
import type { QuotaServiceClient } from "@sluice/protocol";
import type { ThrottlerSpec } from "@sluice/spec";
import type { RetryingQuotaRemote } from "./retrying-quota-remote.ts";

export interface ConcurrencyClientOptions {
  readonly throttlerId: string;
  /** Keyed throttlers (docs/design.md §11.4): renewals name this key, so the answer counts only its units. */
  readonly key?: string;
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

/** Why the units this client held are no longer counted by the controller (docs/design.md §5.3). */
interface LostLease {
  readonly units: number;
  /** What the controller still counted, or null when no renewal got through for lease_timeout. */
  readonly controllerHeld: number | null;
}

/**
 * A job's client of a concurrency throttler (docs/design.md §11.2). Unlike a rate throttler's client it
 * prefetches nothing — a unit held is a task admitted, so holding spare units would admit work
 * nobody is doing — and every throttle() is a RequestQuota for exactly its units. While it holds
 * units it renews their lease every lease_timeout / 3; close() (the job ended) gives them all back.
 *
 * docs/design.md §5.3: units the controller no longer counts (a renewal answers fewer than this client
 * holds, or no renewal got through for lease_timeout: a stall, a cut) are lost — the controller may
 * have given them to others. The next throttle() or release() fails with LEASE_EXPIRED, so the work
 * they admitted fails instead of running unaccounted; after that the client starts afresh.
 */
export class ConcurrencyClient implements Throttler {
  private held = 0;
  private closed = false;
  private renewing: AbortController | null = null;
  /** Requests and releases in flight: while any is, the controller's count and ours may differ for a moment. */
  private busy = 0;
  /** Units asked for or given back by the calls in flight: how far the controller's count may be above ours. */
  private unitsInFlight = 0;
  /** Bumped whenever a request or release starts or ends, so a renewal can tell that none overlapped it. */
  private changes = 0;
  /** When this client last reached out to keep its lease (a grant, or a renewal sent). */
  private lastAttemptAt = 0;
  /** This process went longer than lease_timeout without trying to renew (a stall): lost unless a renewal says otherwise. */
  private stalled = false;
  private lost: LostLease | null = null;
  /**
   * The controller may count units this client does not hold: a release it never received (it was
   * away). Renewals go on, even with nothing held, until one shows the counts agree (or, with
   * nothing held or owed, until `doubtUntil`); each one gives the excess back (`giveBackUnheld`). Without them those units would stay counted until
   * the controller's lease ran out, and a takeover does not count the time nobody led against it.
   */
  private doubt = false;
  /**
   * With callers always waiting no renewal may ever settle a doubt, and renewing keeps the lease of
   * whatever the controller counts: with nothing held or owed, the renewals stop a lease_timeout
   * after the doubt arose, and the controller's lease expiry frees the rest.
   */
  private doubtUntil = 0;
  /**
   * Units whose release failed (the controller was away, or the answer was lost): given back again
   * at a renewal that shows it still counts at least that many more than this client holds. Requests
   * in flight cannot tell them apart — with callers always waiting there always are some — so without
   * this the renewals would keep those units counted for good. A release that was applied but whose
   * answer was lost, retried while a grant in flight raises the count, frees one unit too many; the
   * next quiet renewal then reports it as LEASE_EXPIRED.
   */
  private owed = 0;
  /** Units of the releases in flight: a renewal answered meanwhile may not show them yet. */
  private releasing = 0;

  constructor(private readonly options: ConcurrencyClientOptions) {}

  /** Units this client holds now. */
  get heldUnits(): number {
    return this.held;
  }

  get isClosed(): boolean {
    return this.closed;
  }

  /**
   * Nothing held, asked for, given back, owed or in doubt, and no lease lost to report: a new client
   * in its place would know all this one knows (a keyed throttler drops such a key's client).
   */
  get isIdle(): boolean {
    return this.held === 0 && this.busy === 0 && this.owed === 0 && this.releasing === 0 && !this.doubt && this.lost === null && this.renewing === null;
  }

  async throttle(amount: number, options?: ThrottleOptions): Promise<void> {
    if (this.closed) throw this.closedError();
    this.throwIfLost();
    if (amount === 0) return;
    const signal = options?.signal ?? new AbortController().signal;
    // A request that failed or was cancelled may still have been granted: with units held, the
    // renewals give that back (`giveBackUnheld`); with none, the lease expires. Renewing for it
    // would be worse: callers whose calls keep timing out would keep such leases alive for good.
    await this.tracked(this.options.remote.acquire(amount, signal), amount);
    if (this.closed) {
      // Granted while the job was stopping: nobody will use these units.
      void this.giveBack(amount);
      throw this.closedError();
    }
    this.held += amount;
    this.lastAttemptAt = this.options.clock.now();
    this.startRenewing();
  }

  /** Never takes units without asking the controller: a concurrency client holds no spare units. */
  tryAcquire(_amount: number): boolean {
    return false;
  }

  /**
   * Gives back up to what this client holds (more would free units another holder is using).
   * Throws LEASE_EXPIRED (after giving back what the controller still counts) when the units were lost.
   */
  release(amount: number): void {
    const lost = this.findLost();
    const units = Math.min(Math.max(0, amount), this.held);
    if (units > 0) {
      this.held -= units;
      void this.giveBack(units);
      if (this.held <= 0 && !this.doubt) this.stopRenewing();
    }
    if (lost) throw this.expiredError(lost);
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

  /** Gives units back; one the controller did not take is still counted there: renew until it is not. */
  private async giveBack(units: number): Promise<void> {
    this.releasing += units;
    let taken: boolean;
    try {
      taken = await this.tracked(this.options.remote.releaseReporting(units), units);
    } finally {
      this.releasing = Math.max(0, this.releasing - units);
    }
    if (taken || this.closed) return;
    this.owed += units;
    this.doubted();
  }

  private doubted(): void {
    if (this.closed) return;
    this.doubt = true;
    this.doubtUntil = this.options.clock.now() + this.options.spec().lease_timeout;
    this.startRenewing();
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
        // With calls in flight the controller counts at most ours plus theirs (a grant not yet
        // answered, a release not yet applied), provided none starts or ends meanwhile.
        const before = this.changes;
        const inFlight = this.unitsInFlight;
        const sentAt = clock.now();
        // Renewals fail while the controller is away (a failover restores the leases for a full
        // lease_timeout); only this process not even trying for that long is a stall.
        if (this.held > 0 && sentAt - this.lastAttemptAt > spec.lease_timeout) this.stalled = true;
        this.lastAttemptAt = sentAt;
        const key = this.options.key;
        const answer = await this.options.client().renewLeases?.(
          { clientId, throttlerIds: [throttlerId], ...(key === undefined ? {} : { key }) },
          {
            deadlineAt: sentAt + Math.min(spec.rpc_timeout, spec.lease_timeout / RENEWALS_PER_LEASE),
            signal,
          },
        );
        if (answer && quietSince === null && before === this.changes && !signal.aborted) {
          // Units no call in flight can explain: a lost release, a grant whose caller gave up.
          this.giveBackUnheld(answer.held - inFlight);
          if (this.releasing === 0) this.retryOwed(answer.held);
        }
        if (answer && quietSince !== null && quietSince === this.changes && !signal.aborted) {
          // An excess given back now is confirmed by the next renewal.
          this.doubt = answer.held - this.held > 1e-9;
          this.owed = 0;
          this.giveBackUnheld(answer.held);
          this.noticeLost(answer.held);
          this.stalled = false;
          if (this.held <= 0 && !this.doubt && this.owed === 0) {
            this.stopRenewing();
            return;
          }
        }
        if (this.held <= 0 && this.owed === 0 && this.releasing === 0 && clock.now() >= this.doubtUntil) {
          this.doubt = false;
          this.stopRenewing();
          return;
        }
      } catch {
        /* the controller is away; the next tick tries again */
      }
    }
  }

  /**
   * The controller counts more units for this client than it holds and its calls in flight explain:
   * units it never received (a grant persisted by a leader that died before answering, then given
   * up, or one whose caller gave up) or a release that was lost (the controller was away, or a
   * failover came before it was persisted). Left alone they would stay in use for as long as
   * this client renews; they go back now.
   */
  private giveBackUnheld(controllerHeld: number): void {
    const excess = controllerHeld - this.held;
    if (!(excess > 1e-9) || this.closed) return;
    void this.giveBack(excess);
  }

  /**
   * Gives back again what the controller did not take, as far as it still counts more than this
   * client holds (it may have taken a release whose answer was lost, or expired the lease since).
   */
  private retryOwed(controllerHeld: number): void {
    const units = Math.min(this.owed, Math.max(0, controllerHeld - this.held));
    this.owed = 0;
    if (units > 1e-9 && !this.closed) void this.giveBack(units);
  }

  /** The controller counts fewer units than this client holds, with nothing in flight: the rest are lost. */
  private noticeLost(controllerHeld: number): void {
    const missing = this.held - controllerHeld;
    if (!(missing > 1e-9) || this.closed) return;
    this.markLost({ units: missing, controllerHeld });
  }

  private markLost(lost: LostLease): void {
    this.lost = { units: (this.lost?.units ?? 0) + lost.units, controllerHeld: lost.controllerHeld };
    this.held = Math.max(0, this.held - lost.units);
    if (this.held <= 1e-9) {
      this.held = 0;
      if (!this.doubt) this.stopRenewing();
    }
  }

  /**
   * Lost units, found by a renewal or now: after this process went longer than lease_timeout without
   * trying to renew (stopped, or its event loop blocked), the controller's sweep has given the units
   * back, and a renewal's answer may come too late to stop the work they admitted. Reading it clears
   * it: the client starts afresh.
   */
  private findLost(): LostLease | null {
    const overdue = this.options.clock.now() - this.lastAttemptAt > this.options.spec().lease_timeout;
    if (!this.lost && this.held > 0 && (this.stalled || overdue)) this.markLost({ units: this.held, controllerHeld: null });
    this.stalled = false;
    const lost = this.lost;
    this.lost = null;
    return lost;
  }

  private throwIfLost(): void {
    const lost = this.findLost();
    if (lost) throw this.expiredError(lost);
  }

  private expiredError(lost: LostLease): SluiceError {
    const { throttlerId, clientId } = this.options;
    const leaseTimeoutMs = this.options.spec().lease_timeout;
    const why =
      lost.controllerHeld === null
        ? `this process sent no renewal for longer than lease_timeout (${leaseTimeoutMs} ms): it was stopped or its event loop blocked`
        : `a renewal answered that the controller counts ${lost.controllerHeld} for it (lease_timeout ${leaseTimeoutMs} ms passed without a renewal, or a failover lost them)`;
    return new SluiceError(
      "LEASE_EXPIRED",
      `throttler "${throttlerId}": the controller no longer counts ${lost.units} of the units client ${JSON.stringify(clientId)} held — ${why}; ` +
        "they may be in use by others now, so the work they admitted fails and is redone (with the job's backoff)",
      { throttlerId, clientId, lostUnits: lost.units, controllerHeld: lost.controllerHeld, leaseTimeoutMs },
    );
  }

  private async tracked<T>(call: Promise<T>, units: number): Promise<T> {
    this.busy += 1;
    this.unitsInFlight += units;
    this.changes += 1;
    try {
      return await call;
    } finally {
      this.busy -= 1;
      this.unitsInFlight = this.busy === 0 ? 0 : this.unitsInFlight - units;
      this.changes += 1;
    }
  }

  private closedError(): SluiceError {
    return new SluiceError("CANCELLED", `throttler "${this.options.throttlerId}": the job stopped; its units were given back`, {
      throttlerId: this.options.throttlerId,
    });
  }
}
