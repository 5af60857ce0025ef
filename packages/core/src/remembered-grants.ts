import type { PaceSlots } from "./pace-cursor.ts";

/** What a retry of an already granted request id is answered with. */
export interface RememberedGrant {
  readonly amount: number;
  readonly waitedMs: number;
  readonly expiresAt: number;
  /** A smooth grant's slots: a retry gets the same ones, never new ones. */
  readonly pace?: PaceSlots;
}

/** Below this many forgotten slots at the front, the arrays are not compacted (a copy would cost more than it frees). */
const COMPACT_MIN = 1024;

/**
 * Granted request ids, answered again (not granted again) when a retry comes within the grace.
 *
 * Memory is bounded by count, never by refusing work: `remember` takes the most ids to keep, and
 * past it the oldest are forgotten before their grace ends (`forgottenEarly` counts them). A retry
 * of a forgotten id is a new request and is granted again. With the default bound (100 ×
 * max_queue_size = 1,000,000 ids) that happens only above ~16,700 grants/s of new ids per
 * throttler, and then an id is still remembered for 1,000,000 ÷ the grant rate seconds (10 s at
 * 100,000 grants/s), which covers a client retrying a lost answer (README: "Throttler semantics").
 *
 * Kept as parallel arrays in grant order (ids, amounts, waits, expiries: doubles stored unboxed)
 * with a Map from id to its position, not an object per id: this runs once per grant, and at a
 * million ids a record each was most of the controller's garbage (bench/README.md, group 8).
 */
export class RememberedGrants {
  /** Id → its sequence number (its position is `seq - firstSeq`). */
  private readonly byId = new Map<string, number>();
  private ids: string[] = [];
  private amounts: number[] = [];
  private waits: number[] = [];
  private expiries: number[] = [];
  /** The slots of smooth grants only (most throttlers are not smooth). */
  private readonly paces = new Map<number, PaceSlots>();
  /** Sequence number of `ids[0]`. */
  private firstSeq = 0;
  /** Position of the oldest slot still in use. */
  private head = 0;
  private evicted = 0;

  get size(): number {
    return this.byId.size;
  }

  /** Ids forgotten before their grace ended, to stay within the bound. */
  get forgottenEarly(): number {
    return this.evicted;
  }

  get(id: string): RememberedGrant | undefined {
    const seq = this.byId.get(id);
    if (seq === undefined) return undefined;
    const at = seq - this.firstSeq;
    const pace = this.paces.get(seq);
    const grant = { amount: this.amounts[at] as number, waitedMs: this.waits[at] as number, expiresAt: this.expiries[at] as number };
    return pace ? { ...grant, pace } : grant;
  }

  /** Remembers a grant until `expiresAt`, forgetting the oldest first while more than `bound` are held. */
  remember(id: string, amount: number, waitedMs: number, expiresAt: number, bound: number, pace?: PaceSlots): void {
    if (this.byId.size >= bound) {
      while (this.byId.size >= bound && this.head < this.ids.length) {
        if (this.forgetHead()) this.evicted += 1;
      }
      this.compact();
    }
    const seq = this.firstSeq + this.ids.length;
    this.byId.set(id, seq);
    this.ids.push(id);
    this.amounts.push(amount);
    this.waits.push(waitedMs);
    this.expiries.push(expiresAt);
    if (pace) this.paces.set(seq, pace);
  }

  forgetExpired(now: number): void {
    const start = this.head;
    while (this.head < this.ids.length && (this.expiries[this.head] as number) <= now) this.forgetHead();
    if (this.head !== start) this.compact();
  }

  /** Drops the oldest slot; true when it was the id's latest grant (a retried id may have been granted again since). */
  private forgetHead(): boolean {
    const at = this.head;
    const seq = this.firstSeq + at;
    const id = this.ids[at] as string;
    this.head += 1;
    this.paces.delete(seq);
    if (this.byId.get(id) !== seq) return false;
    this.byId.delete(id);
    return true;
  }

  private compact(): void {
    const head = this.head;
    if (head <= COMPACT_MIN || head * 2 <= this.ids.length) return;
    this.ids = this.ids.slice(head);
    this.amounts = this.amounts.slice(head);
    this.waits = this.waits.slice(head);
    this.expiries = this.expiries.slice(head);
    this.firstSeq += head;
    this.head = 0;
  }
}
