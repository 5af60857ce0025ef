import type { PaceSlots } from "./pace-cursor.ts";

/** What a retry of an already granted request id is answered with. */
export interface RememberedGrant {
  readonly amount: number;
  readonly waitedMs: number;
  readonly expiresAt: number;
  /** A smooth grant's slots: a retry gets the same ones, never new ones. */
  readonly pace?: PaceSlots;
}

/**
 * Granted request ids, answered again (not granted again) when a retry comes within the grace.
 * An id is never dropped before its grace ends, whatever the grant rate: the owner bounds memory by
 * refusing new ids while it holds too many (QuotaBucket: `REQUEST_IDS_PER_QUEUE_SLOT`).
 */
export class RememberedGrants {
  private readonly byId = new Map<string, RememberedGrant>();
  /**
   * The same ids in grant order (with their expiry), so expiry looks only at the oldest — walking
   * the Map from its start on every request cost time in proportion to the ids remembered
   * (bench/README.md). Two parallel arrays from `head` on, not an object per id.
   */
  private orderIds: string[] = [];
  private orderExpiries: number[] = [];
  private head = 0;

  get size(): number {
    return this.byId.size;
  }

  get(id: string): RememberedGrant | undefined {
    return this.byId.get(id);
  }

  remember(id: string, amount: number, waitedMs: number, expiresAt: number, pace?: PaceSlots): void {
    this.byId.set(id, pace ? { amount, waitedMs, expiresAt, pace } : { amount, waitedMs, expiresAt });
    this.orderIds.push(id);
    this.orderExpiries.push(expiresAt);
  }

  forgetExpired(now: number): void {
    const ids = this.orderIds;
    const expiries = this.orderExpiries;
    let head = this.head;
    while (head < ids.length && (expiries[head] as number) <= now) {
      const id = ids[head] as string;
      // A retried id may have been granted again since: only its latest record counts.
      if (this.byId.get(id)?.expiresAt === expiries[head]) this.byId.delete(id);
      head += 1;
    }
    if (head === this.head) return;
    if (head > 1024 && head * 2 > ids.length) {
      this.orderIds = ids.slice(head);
      this.orderExpiries = expiries.slice(head);
      head = 0;
    }
    this.head = head;
  }
}
