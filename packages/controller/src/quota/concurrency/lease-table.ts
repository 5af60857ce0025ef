// Who holds the units of each concurrency throttler (docs/design.md §11.2), a pure table: every method takes
// `now`. A holder's lease covers all the units it holds on one throttler and ends `leaseMs` after
// its last grant or renewal; the controller gives an ended lease's units back to the bucket, so a
// crashed holder never leaks capacity for good.

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
}

export class LeaseTable {
  private readonly throttlers = new Map<string, Map<string, Lease>>();
  private nextLeaseId = 1;

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
      lease = { id: this.nextLeaseId++, byClass: new Map(), units: 0, expiresAt: now + leaseMs };
      holders.set(clientId, lease);
    }
    lease.byClass.set(classId, (lease.byClass.get(classId) ?? 0) + amount);
    lease.units += amount;
    lease.expiresAt = Math.max(lease.expiresAt, now + leaseMs);
    return lease.id;
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

  /** Extends every lease of `clientId` on these throttlers; returns the units they cover. */
  renew(clientId: string, throttlerIds: readonly string[], now: number, leaseMsOf: (throttlerId: string) => number): number {
    let held = 0;
    for (const id of throttlerIds) {
      const lease = this.throttlers.get(id)?.get(clientId);
      if (!lease) continue;
      lease.expiresAt = Math.max(lease.expiresAt, now + leaseMsOf(id));
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
