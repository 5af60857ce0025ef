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
   * The same ids in grant order, so expiry looks only at the oldest — walking the Map from its
   * start on every request cost time in proportion to the ids remembered (bench/README.md).
   */
  private readonly order: { readonly id: string; readonly expiresAt: number }[] = [];
  private head = 0;

  get size(): number {
    return this.byId.size;
  }

  get(id: string): RememberedGrant | undefined {
    return this.byId.get(id);
  }

  remember(id: string, amount: number, waitedMs: number, expiresAt: number, pace?: PaceSlots): void {
    this.byId.set(id, { amount, waitedMs, expiresAt, ...(pace ? { pace } : {}) });
    this.order.push({ id, expiresAt });
  }

  forgetExpired(now: number): void {
    for (let oldest = this.order[this.head]; oldest && oldest.expiresAt <= now; oldest = this.order[this.head]) {
      this.dropOldest();
    }
  }

  private dropOldest(): void {
    const oldest = this.order[this.head];
    if (!oldest) return;
    this.head += 1;
    // A retried id may have been granted again since: only its latest record counts.
    if (this.byId.get(oldest.id)?.expiresAt === oldest.expiresAt) this.byId.delete(oldest.id);
    if (this.head > 1024 && this.head * 2 > this.order.length) {
      this.order.splice(0, this.head);
      this.head = 0;
    }
  }
}
