import type { Clock } from "@sluice/core";
import { LeaseTable } from "./lease-table.ts";

/** How often ended leases are looked for: a holder's units come back at most this late after lease_timeout. */
export const LEASE_SWEEP_MS = 250;

/** What DescribeThrottlers, /metrics and `sluice top` show of a concurrency throttler's holders. */
export interface ConcurrencySnapshot {
  readonly leaseTimeoutMs: number;
  /** Clients holding units now. */
  readonly holders: number;
  /** Units the lease table counts as held (equals the bucket's inUse unless a release is in flight). */
  readonly heldUnits: number;
  /** Leases that ended without renewal (their holder stopped renewing: crashed or cut off). */
  readonly expiredLeases: number;
  /** Units given back by those leases. */
  readonly expiredUnits: number;
}

export interface ConcurrencyLeasesOptions {
  readonly clock: Clock;
  readonly log: (line: string) => void;
  /** lease_timeout of a concurrency throttler, null when the id is not one (now). */
  readonly leaseMsOf: (throttlerId: string) => number | null;
  /** Gives units back to a throttler's bucket. */
  readonly releaseUnits: (throttlerId: string, amount: number, classId: string) => void;
}

/**
 * The controller's side of concurrency leases: records grants, checks releases against what each
 * holder holds, renews, and gives back the units of holders that stopped renewing.
 */
export class ConcurrencyLeases {
  private readonly table = new LeaseTable();
  private readonly expired = new Map<string, { leases: number; units: number }>();
  private readonly stopping = new AbortController();

  constructor(private readonly options: ConcurrencyLeasesOptions) {
    void this.sweep();
  }

  granted(throttlerId: string, clientId: string, classId: string, amount: number): void {
    const leaseMs = this.options.leaseMsOf(throttlerId);
    if (leaseMs === null) return;
    this.table.grant(throttlerId, clientId, classId, amount, this.options.clock.now(), leaseMs);
  }

  /** Gives back what `clientId` holds of `amount`; returns the units actually given back. */
  released(throttlerId: string, clientId: string, classId: string, amount: number): number {
    const released = this.table.release(throttlerId, clientId, classId, amount);
    if (released > 0) this.options.releaseUnits(throttlerId, released, classId);
    return released;
  }

  renew(clientId: string, throttlerIds: readonly string[]): number {
    return this.table.renew(clientId, throttlerIds, this.options.clock.now(), (id) => this.options.leaseMsOf(id) ?? 0);
  }

  snapshot(throttlerId: string): ConcurrencySnapshot | undefined {
    const leaseTimeoutMs = this.options.leaseMsOf(throttlerId);
    if (leaseTimeoutMs === null) return undefined;
    const { units, holders } = this.table.held(throttlerId);
    const expired = this.expired.get(throttlerId) ?? { leases: 0, units: 0 };
    return { leaseTimeoutMs, holders, heldUnits: units, expiredLeases: expired.leases, expiredUnits: expired.units };
  }

  /** The throttler is gone or no longer counts units in use: its leases end without a release. */
  forget(throttlerId: string): void {
    this.table.forget(throttlerId);
    this.expired.delete(throttlerId);
  }

  close(): void {
    this.stopping.abort();
  }

  private async sweep(): Promise<void> {
    const signal = this.stopping.signal;
    while (!signal.aborted) {
      try {
        await this.options.clock.sleep(LEASE_SWEEP_MS, signal);
      } catch {
        return;
      }
      for (const lease of this.table.expire(this.options.clock.now())) {
        const counts = this.expired.get(lease.throttlerId) ?? { leases: 0, units: 0 };
        counts.leases += 1;
        counts.units += lease.units;
        this.expired.set(lease.throttlerId, counts);
        for (const [classId, units] of lease.byClass) this.options.releaseUnits(lease.throttlerId, units, classId);
        this.options.log(
          `concurrency ${lease.throttlerId}: lease of ${JSON.stringify(lease.clientId)} ended without renewal ` +
            `(lease_timeout ${this.options.leaseMsOf(lease.throttlerId) ?? "?"}ms); ${lease.units} units given back`,
        );
      }
    }
  }
}
