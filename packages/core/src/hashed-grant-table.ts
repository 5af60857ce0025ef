/**
 * Grants keyed by a 64-bit id hash (two 32-bit halves), held in typed arrays only: a ring in grant
 * order (what expires first is at its head) and an open-addressing index from hash to ring slot.
 * Typed arrays keep their contents outside the JavaScript heap, so a million remembered grants are
 * a handful of objects for the GC to mark, not a million strings and map entries whose marking
 * would set the controller's latency.
 *
 * A slot's fields sit side by side (its hash halves in one array, its figures in another), so
 * that pushing, finding or dropping one touches a cache line or two, not one per field: a keyed
 * throttler has a table per active key, and those are cold.
 *
 * The index probes linearly and deletes by backward shift (no tombstones to pile up), at most half
 * full: it has twice the ring's slots. Each index slot holds its ring slot and the hash's low half
 * side by side, so a probe compares in the index itself: finding an id that is not there (most ids
 * a busy controller sees are new), and dropping the oldest, touch the index where the hash lands
 * and the ring where it is warm (its head and tail), not the ring slot of every entry passed. A hash pushed again while its earlier grant is still held
 * points the index at the new slot; the earlier one stays in the ring, *superseded*, until the
 * head reaches it (`dropOldest` then returns false, so it is not counted as an id forgotten).
 */

/** The smallest ring (and half the smallest index): a table per throttler, most of them quiet. */
const MIN_CAPACITY = 16;
/** Figures per slot in `grants`: amount, waitedMs, expiresAt. */
const GRANT_FIELDS = 3;
/** Numbers per index slot: ring slot + 1, the hash's low half. */
const INDEX_FIELDS = 2;

/** A grant read back from the table; `paceStartAt` is NaN when the grant had no slots. */
export interface HashedGrant {
  readonly amount: number;
  readonly waitedMs: number;
  readonly expiresAt: number;
  readonly paceStartAt: number;
  readonly paceIntervalMs: number;
}

export class HashedGrantTable {
  /** Ring slots (a power of two). */
  private capacity = MIN_CAPACITY;
  private head = 0;
  /** Ring slots in use, superseded ones included. */
  private used = 0;
  /** Hashes the index finds. */
  private live = 0;
  /** Per slot: the hash's high half, then its low half. */
  private hashes = new Uint32Array(MIN_CAPACITY * 2);
  /** Per slot: amount, waitedMs, expiresAt. */
  private grants = new Float64Array(MIN_CAPACITY * GRANT_FIELDS);
  /** Per slot: paceStartAt, paceIntervalMs; only once a paced grant is pushed (most throttlers are not smooth, and 16 B per id is a third more). */
  private paces: Float64Array | null = null;
  /** Per index slot: ring slot + 1 (0 is empty), then the hash's low half. */
  private index = new Int32Array(MIN_CAPACITY * 2 * INDEX_FIELDS);

  /** Distinct hashes held. */
  get size(): number {
    return this.live;
  }

  /** Ring slots in use (≥ size: superseded grants wait for the head). */
  get slotsInUse(): number {
    return this.used;
  }

  /** Bytes of the typed arrays (for tests and the memory figures of docs/internals/request-ids.md). */
  get bytes(): number {
    const perSlot = 4 + 4 + 8 * GRANT_FIELDS + (this.paces ? 16 : 0) + 2 * 4 * INDEX_FIELDS;
    return this.capacity * perSlot;
  }

  /** When the oldest held grant expires, or Infinity when none is held. */
  get oldestExpiresAt(): number {
    return this.used === 0 ? Infinity : (this.grants[this.head * GRANT_FIELDS + 2] as number);
  }

  /** The latest grant pushed with this hash, if still held. */
  find(high: number, low: number): HashedGrant | undefined {
    const at = this.indexSlotOf(high, low);
    if (at < 0) return undefined;
    const slot = (this.index[at * INDEX_FIELDS] as number) - 1;
    const g = slot * GRANT_FIELDS;
    return {
      amount: this.grants[g] as number,
      waitedMs: this.grants[g + 1] as number,
      expiresAt: this.grants[g + 2] as number,
      paceStartAt: this.paces ? (this.paces[slot * 2] as number) : NaN,
      paceIntervalMs: this.paces ? (this.paces[slot * 2 + 1] as number) : NaN,
    };
  }

  /** Appends a grant at the tail (expiries must not decrease); pass NaN as `paceStartAt` for none. */
  push(high: number, low: number, amount: number, waitedMs: number, expiresAt: number, paceStartAt: number, paceIntervalMs: number): void {
    if (this.used === this.capacity) this.resize(this.capacity * 2);
    if (!Number.isNaN(paceStartAt) && !this.paces) this.paces = new Float64Array(this.capacity * 2).fill(NaN);
    const slot = (this.head + this.used) & (this.capacity - 1);
    this.used += 1;
    this.hashes[slot * 2] = high;
    this.hashes[slot * 2 + 1] = low;
    const g = slot * GRANT_FIELDS;
    this.grants[g] = amount;
    this.grants[g + 1] = waitedMs;
    this.grants[g + 2] = expiresAt;
    if (this.paces) {
      this.paces[slot * 2] = paceStartAt;
      this.paces[slot * 2 + 1] = paceIntervalMs;
    }
    this.link(slot);
  }

  /** Drops the head of the ring; true when it was its hash's latest grant (the hash is forgotten). */
  dropOldest(): boolean {
    if (this.used === 0) return false;
    const slot = this.head;
    this.head = (this.head + 1) & (this.capacity - 1);
    this.used -= 1;
    const at = this.indexSlotOf(this.hashes[slot * 2] as number, this.hashes[slot * 2 + 1] as number);
    if (at < 0 || (this.index[at * INDEX_FIELDS] as number) !== slot + 1) return false;
    this.unlink(at);
    this.live -= 1;
    return true;
  }

  /** Gives memory back after a burst expired: halves… to twice what is in use, once at most 1/8 is. */
  shrinkIfSparse(): void {
    if (this.capacity <= MIN_CAPACITY || this.used * 8 > this.capacity) return;
    let capacity = MIN_CAPACITY;
    while (capacity < this.used * 2) capacity *= 2;
    this.resize(capacity);
  }

  /** Index slot holding this hash, or -1. */
  private indexSlotOf(high: number, low: number): number {
    const index = this.index;
    const mask = index.length / INDEX_FIELDS - 1;
    const lowBits = low | 0;
    for (let at = low & mask; ; at = (at + 1) & mask) {
      const entry = index[at * INDEX_FIELDS] as number;
      if (entry === 0) return -1;
      // The low half first, from the index; the high half (the ring's) only when that matches.
      if (index[at * INDEX_FIELDS + 1] === lowBits && this.hashes[entry * 2 - 2] === high) return at;
    }
  }

  /** Points the index at `slot` for its hash: replaces an earlier grant's slot, or takes an empty one. */
  private link(slot: number): void {
    const high = this.hashes[slot * 2] as number;
    const low = this.hashes[slot * 2 + 1] as number;
    const index = this.index;
    const mask = index.length / INDEX_FIELDS - 1;
    const lowBits = low | 0;
    for (let at = low & mask; ; at = (at + 1) & mask) {
      const entry = index[at * INDEX_FIELDS] as number;
      if (entry === 0) {
        index[at * INDEX_FIELDS] = slot + 1;
        index[at * INDEX_FIELDS + 1] = lowBits;
        this.live += 1;
        return;
      }
      if (index[at * INDEX_FIELDS + 1] === lowBits && this.hashes[entry * 2 - 2] === high) {
        index[at * INDEX_FIELDS] = slot + 1;
        return;
      }
    }
  }

  /**
   * Empties index slot `hole` and moves later entries of the probe run back into it when their home
   * is not between the hole and them (cyclically), so every entry stays reachable from its home.
   */
  private unlink(hole: number): void {
    const index = this.index;
    const mask = index.length / INDEX_FIELDS - 1;
    for (let at = (hole + 1) & mask; ; at = (at + 1) & mask) {
      const entry = index[at * INDEX_FIELDS] as number;
      if (entry === 0) break;
      const home = (index[at * INDEX_FIELDS + 1] as number) & mask;
      const homeAfterHole = hole <= at ? home > hole && home <= at : home > hole || home <= at;
      if (homeAfterHole) continue;
      index[hole * INDEX_FIELDS] = entry;
      index[hole * INDEX_FIELDS + 1] = index[at * INDEX_FIELDS + 1] as number;
      hole = at;
    }
    index[hole * INDEX_FIELDS] = 0;
  }

  /** Copies the ring in grant order into arrays of `capacity` slots and rebuilds the index. */
  private resize(capacity: number): void {
    const hashes = new Uint32Array(capacity * 2);
    const grants = new Float64Array(capacity * GRANT_FIELDS);
    const paces = this.paces ? new Float64Array(capacity * 2) : null;
    // The ring in grant order is at most two runs: from the head to the end, then from slot 0.
    const first = Math.min(this.used, this.capacity - this.head);
    const runs: [from: number, count: number, to: number][] = [
      [this.head, first, 0],
      [0, this.used - first, first],
    ];
    for (const [from, count, to] of runs) {
      hashes.set(this.hashes.subarray(from * 2, (from + count) * 2), to * 2);
      grants.set(this.grants.subarray(from * GRANT_FIELDS, (from + count) * GRANT_FIELDS), to * GRANT_FIELDS);
      if (paces && this.paces) paces.set(this.paces.subarray(from * 2, (from + count) * 2), to * 2);
    }
    this.hashes = hashes;
    this.grants = grants;
    this.paces = paces;
    this.capacity = capacity;
    this.head = 0;
    this.index = new Int32Array(capacity * 2 * INDEX_FIELDS);
    this.live = 0;
    // In grant order, so a superseded grant's hash ends up pointing at its latest slot.
    for (let slot = 0; slot < this.used; slot += 1) this.link(slot);
  }
}
