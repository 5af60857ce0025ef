// Who holds the units of each concurrency throttler (docs/design.md §11.2), a pure table: every method takes
// `now`. A holder's lease covers all the units it holds on one throttler and ends `leaseMs` after
// its last grant or renewal; the controller gives an ended lease's units back to the bucket, so a
// crashed holder never leaks capacity for good.
//
// Across failovers a lease's time is the time some leader served without hearing from its holder
// (its silence): nobody could renew while nobody led, so that time does not count, but each
// leader's serving time does. A successor restores each holder's silence (persisted by
// `silenceToPersist`) and ends its lease when the silence reaches leaseMs, however short each
// leadership was: a fresh lease_timeout per takeover kept a silent holder's units for good once
// failovers came faster than lease_timeout.

export interface ExpiredLease {
  readonly throttlerId: string;
  readonly clientId: string;
  /** Units per quota class, as they were granted (a release names its class). */
  readonly byClass: ReadonlyMap<string, number>;
  readonly units: number;
}

interface Lease {
  /** Which lease this is: a holder whose lease ended and who is granted again gets a new one. */
  readonly id: number;
  readonly byClass: Map<string, number>;
  units: number;
  expiresAt: number;
  /** When this leader last heard from the holder (a grant or a renewal), or restored the lease. */
  heardAt: number;
  /** Silence carried over from predecessors (0 once heard from here). */
  silentBefore: number;
  /** Restored and not heard from since: its silence is persisted at every step, so it adds up across short leaderships. */
  restored: boolean;
  /** The silence last handed out for persisting (see silenceToPersist). */
  persistedSilence: number;
}

/** Silence is persisted in steps of this part of leaseMs: a leader rewrites a silent holder's record at most this often. */
const SILENCE_STEPS_PER_LEASE = 10;
/** A holder heard from here has its silence persisted once it is this part of leaseMs overdue (it renews every third). */
const OVERDUE_PART = 0.5;

export class LeaseTable {
  private readonly throttlers = new Map<string, Map<string, Lease>>();
  private nextLeaseId = 1;
  /** Renewals that ended a silence already handed out for persisting: each changes what a successor would restore. */
  silencesEnded = 0;
  /**
   * No holder's silence to persist changes before this time (silencePass works it out; new and
   * restored leases bring it forward), so a leader need not look at every holder before then.
   */
  private silenceDueAt = Number.NEGATIVE_INFINITY;

  /** Returns the id of the lease that now covers the units (0 when nothing was granted). */
  grant(throttlerId: string, clientId: string, classId: string, amount: number, now: number, leaseMs: number): number {
    if (amount <= 0) return 0;
    let holders = this.throttlers.get(throttlerId);
    if (!holders) {
      holders = new Map();
      this.throttlers.set(throttlerId, holders);
    }
    let lease = holders.get(clientId);
    if (!lease) {
      lease = {
        id: this.nextLeaseId++,
        byClass: new Map(),
        units: 0,
        expiresAt: now + leaseMs,
        heardAt: now,
        silentBefore: 0,
        restored: false,
        persistedSilence: 0,
      };
      holders.set(clientId, lease);
      // A new lease's silence is persisted once it is overdue.
      this.silenceDueAt = Math.min(this.silenceDueAt, now + leaseMs * OVERDUE_PART);
    }
    lease.byClass.set(classId, (lease.byClass.get(classId) ?? 0) + amount);
    lease.units += amount;
    heard(lease, now, leaseMs);
    return lease.id;
  }

  /**
   * A predecessor's holder, restored with `grant`: its lease goes on from the silence the
   * predecessor persisted, so it ends once leaders served leaseMs in all without hearing from it.
   */
  restoredSilence(throttlerId: string, clientId: string, silentMs: number, now: number, leaseMs: number): void {
    const lease = this.throttlers.get(throttlerId)?.get(clientId);
    if (!lease) return;
    const carried = Number.isFinite(silentMs) && silentMs > 0 ? silentMs : 0;
    lease.silentBefore = carried;
    lease.heardAt = now;
    lease.restored = true;
    lease.persistedSilence = quantized(carried, leaseMs);
    lease.expiresAt = now + Math.max(0, leaseMs - carried);
    this.silenceDueAt = Math.min(this.silenceDueAt, now);
  }

  /**
   * Each holder's silence to persist now, where it is not 0: every step of a restored lease not
   * heard from since, and of an overdue one. `changed` says whether any differs from the last call,
   * so a leader rewrites the record only when a successor would restore something different.
   */
  silenceToPersist(throttlerId: string, now: number, leaseMs: number): { silentMs: Map<string, number>; changed: boolean } {
    const silentMs = new Map<string, number>();
    let changed = false;
    for (const [clientId, lease] of this.throttlers.get(throttlerId) ?? []) {
      const persisted = silenceOf(lease, now, leaseMs);
      if (persisted !== lease.persistedSilence) {
        lease.persistedSilence = persisted;
        changed = true;
      }
      if (persisted > 0) silentMs.set(clientId, persisted);
    }
    return { silentMs, changed };
  }

  /**
   * Whether a holder's silence to persist may differ from the last one handed out (silenceToPersist)
   * at `now`: false until the earliest time one can (a new step of a silent holder, a holder
   * becoming overdue), so a leader looks at every holder only when something may have changed.
   */
  silenceMayChange(now: number): boolean {
    return now >= this.silenceDueAt;
  }

  /**
   * Hands out every holder's silence to persist as of `now` (as silenceToPersist does), calls
   * `changed` with each throttler id whose silences differ from the last ones handed out, and works
   * out when one may change next. Returns whether any changed.
   */
  silencePass(now: number, leaseMsOf: (throttlerId: string) => number | null, changed: (throttlerId: string) => void): boolean {
    let any = false;
    let dueAt = Number.POSITIVE_INFINITY;
    for (const [throttlerId, holders] of this.throttlers) {
      if (holders.size === 0) continue;
      const leaseMs = leaseMsOf(throttlerId);
      if (leaseMs === null) continue;
      let changedHere = false;
      for (const lease of holders.values()) {
        const persisted = silenceOf(lease, now, leaseMs);
        if (persisted !== lease.persistedSilence) {
          lease.persistedSilence = persisted;
          changedHere = true;
        }
        dueAt = Math.min(dueAt, nextSilenceChangeAt(lease, now, leaseMs));
      }
      if (changedHere) {
        any = true;
        changed(throttlerId);
      }
    }
    this.silenceDueAt = dueAt;
    return any;
  }

  /** lease_timeout may be another now: the next pass looks at every holder. */
  leaseTimesChanged(): void {
    this.silenceDueAt = Number.NEGATIVE_INFINITY;
  }

  /** The id of `clientId`'s lease on a throttler now, or 0 when it holds none. */
  leaseIdOf(throttlerId: string, clientId: string): number {
    return this.throttlers.get(throttlerId)?.get(clientId)?.id ?? 0;
  }

  /**
   * A holder gives back `amount` units of `classId`. Returns what it actually held (at most
   * `amount`): a release of units the holder does not hold (already expired, or never granted)
   * must not free someone else's.
   */
  release(throttlerId: string, clientId: string, classId: string, amount: number): number {
    const holders = this.throttlers.get(throttlerId);
    const lease = holders?.get(clientId);
    if (!holders || !lease || amount <= 0) return 0;
    let left = amount;
    // The named class first, then any other class of this holder (a class renamed meanwhile).
    for (const id of [classId, ...lease.byClass.keys()]) {
      const held = lease.byClass.get(id) ?? 0;
      const taken = Math.min(held, left);
      if (taken <= 0) continue;
      if (held - taken <= 0) lease.byClass.delete(id);
      else lease.byClass.set(id, held - taken);
      left -= taken;
      if (left <= 0) break;
    }
    const released = amount - left;
    lease.units -= released;
    if (lease.units <= 1e-9) holders.delete(clientId);
    return released;
  }

  /**
   * Extends every lease of `clientId` on these throttlers; returns the units they cover.
   * `silenceEnded` hears of each throttler whose persisted silences this changes.
   */
  renew(
    clientId: string,
    throttlerIds: readonly string[],
    now: number,
    leaseMsOf: (throttlerId: string) => number,
    silenceEnded?: (throttlerId: string) => void,
  ): number {
    let held = 0;
    for (const id of throttlerIds) {
      const lease = this.throttlers.get(id)?.get(clientId);
      if (!lease) continue;
      if (lease.persistedSilence > 0) {
        this.silencesEnded += 1;
        silenceEnded?.(id);
      }
      heard(lease, now, leaseMsOf(id));
      held += lease.units;
    }
    return held;
  }

  /** Removes and returns every lease that ended at or before `now`. */
  expire(now: number): ExpiredLease[] {
    const expired: ExpiredLease[] = [];
    for (const [throttlerId, holders] of this.throttlers) {
      for (const [clientId, lease] of holders) {
        if (lease.expiresAt > now) continue;
        holders.delete(clientId);
        expired.push({ throttlerId, clientId, byClass: lease.byClass, units: lease.units });
      }
    }
    return expired;
  }

  /** Units held and the number of holders of one throttler. */
  held(throttlerId: string): { units: number; holders: number } {
    const holders = this.throttlers.get(throttlerId);
    let units = 0;
    for (const lease of holders?.values() ?? []) units += lease.units;
    return { units, holders: holders?.size ?? 0 };
  }

  /** Every holder of one throttler with its units per class (persisted for a successor, docs/design.md §5.2). */
  holdersOf(throttlerId: string): { clientId: string; byClass: ReadonlyMap<string, number> }[] {
    return [...(this.throttlers.get(throttlerId) ?? new Map<string, Lease>())].map(([clientId, lease]) => ({ clientId, byClass: lease.byClass }));
  }

  /** Throttlers with at least one holder. */
  throttlerIds(): string[] {
    return [...this.throttlers].filter(([, holders]) => holders.size > 0).map(([id]) => id);
  }

  /** A throttler removed or no longer of kind concurrency: its leases mean nothing any more. */
  forget(throttlerId: string): void {
    this.throttlers.delete(throttlerId);
  }
}

/** The holder spoke (a grant or a renewal): a full lease from now, and no silence carried any more. */
function heard(lease: Lease, now: number, leaseMs: number): void {
  lease.heardAt = now;
  lease.silentBefore = 0;
  lease.restored = false;
  lease.expiresAt = Math.max(lease.expiresAt, now + leaseMs);
}

/** The silence of a lease to persist at `now`: every step of a restored lease not heard from since, and of an overdue one; else 0. */
function silenceOf(lease: Lease, now: number, leaseMs: number): number {
  const silence = lease.silentBefore + Math.max(0, now - lease.heardAt);
  return lease.restored || silence >= leaseMs * OVERDUE_PART ? quantized(silence, leaseMs) : 0;
}

/**
 * When silenceOf(lease) changes next with nothing heard meanwhile: when it becomes overdue, else at
 * its next step. A millisecond early, so that rounding never makes it late (a pass that finds
 * nothing changed costs one look at the holders).
 */
function nextSilenceChangeAt(lease: Lease, now: number, leaseMs: number): number {
  const step = leaseMs / SILENCE_STEPS_PER_LEASE;
  if (!(step > 0)) return Number.POSITIVE_INFINITY;
  const silence = lease.silentBefore + Math.max(0, now - lease.heardAt);
  const next = !lease.restored && silence < leaseMs * OVERDUE_PART ? leaseMs * OVERDUE_PART : (Math.floor(silence / step + 1e-9) + 1) * step;
  return now + (next - silence) - 1;
}

/** Silence rounded down to a step (rounding down only lengthens a successor's lease). */
function quantized(silence: number, leaseMs: number): number {
  const step = leaseMs / SILENCE_STEPS_PER_LEASE;
  return step > 0 ? Math.floor(silence / step + 1e-9) * step : 0;
}
