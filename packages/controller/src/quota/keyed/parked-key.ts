// A key with no request for a while is kept as three numbers instead of a whole bucket (docs/design.md §11.4:
// 100,000 idle keys on one controller). A bucket with no waiter, no held unit and no pacing in the
// future is fully described by its balance at an instant (its granted request ids are remembered by
// its throttler, for every key, not by the bucket): brought back, it
// continues from that balance plus what accrued since (QuotaBucketDriver.restoreBalance), exactly as
// the bucket it was would have.

/** A parked key: its balance at `atMs` (NaN when unlimited), and when its last request came. */
export class ParkedKey {
  constructor(
    readonly balance: number,
    readonly atMs: number,
    readonly lastRequestAt: number,
  ) {}
}

/** The balance of a parked key `now`, accrued at `limit` units/s and capped at `capacity`. */
export function parkedBalanceAt(parked: ParkedKey, now: number, limit: number | null, capacity: number | null): number {
  if (limit === null || capacity === null || Number.isNaN(parked.balance)) return Number.POSITIVE_INFINITY;
  return Math.min(capacity, parked.balance + (Math.max(0, now - parked.atMs) * limit) / 1000);
}
