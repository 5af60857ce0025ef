import { HashedGrantTable } from "./hashed-grant-table.ts";
import { hashRequestId, scopeSeedOf, UNSCOPED_HIGH, UNSCOPED_LOW, type IdHasher } from "./id-hash.ts";
import type { PaceSlots } from "./pace-cursor.ts";

/** What a retry of an already granted request id is answered with. */
export interface RememberedGrant {
  /** Units granted. */
  readonly amount: number;
  /** What the grant's answer said the request waited. */
  readonly waitedMs: number;
  /** When its grace ends (on the bucket's clock). */
  readonly expiresAt: number;
  /** A smooth grant's slots: a retry gets the same ones, never new ones. */
  readonly pace?: PaceSlots;
}

/**
 * What a QuotaBucket asks of its memory of granted ids: its own RememberedGrants (an unkeyed
 * throttler), or its key's view of the one its keyed throttler shares among its keys (`scoped`).
 */
export interface GrantMemory {
  /** Ids held (a view: its whole table's, every key's). */
  readonly size: number;
  /** Ids forgotten before their grace ended (a view: its whole table's). */
  readonly forgottenEarly: number;
  /** The grant remembered for `id`, if its grace has not ended (or it was not forgotten early). */
  get(id: string): RememberedGrant | undefined;
  /** Remembers a grant until `expiresAt`, forgetting the oldest first while `bound` or more are held. */
  remember(id: string, amount: number, waitedMs: number, expiresAt: number, bound: number, pace?: PaceSlots): void;
  /** Forgets what passed its grace by `now`. */
  forgetExpired(now: number): void;
}

/**
 * Where the hash of the id at hand is written: one array for every table (the hash is used at once,
 * synchronously), so that it stays in cache across a controller's tables.
 */
const scratch = new Uint32Array(2);
/** The id, seeds and hasher whose hash `scratch` holds: a submit looks an id up, then remembers it, hashing it once. */
let lastHashed: string | null = null;
let lastSeedHigh = 0;
let lastSeedLow = 0;
let lastHasher: IdHasher | null = null;

/**
 * Granted request ids, answered again (not granted again) when a retry comes within the grace.
 *
 * Memory is bounded by count, never by refusing work: `remember` takes the most ids to keep, and
 * past it the oldest are forgotten before their grace ends (`forgottenEarly` counts them). A retry
 * of a forgotten id is a new request and is granted again. With the default bound (100 ×
 * max_queue_size = 1,000,000 ids) that happens only above ~16,700 grants/s of new ids per
 * throttler, and then an id is still remembered for 1,000,000 ÷ the grant rate seconds (10 s at
 * 100,000 grants/s), which covers a client retrying a lost answer (docs/internals/request-ids.md).
 *
 * Only a 64-bit hash of each id is kept (id-hash.ts), in typed arrays (hashed-grant-table.ts): no
 * string, map entry or record per id survives for the GC to mark, so a million ids do not make the
 * controller's latency follow its mark-compact pauses. The cost is a false
 * positive: a new id whose 64-bit hash equals a remembered one's is taken for a retry of it
 * (answered with that grant when the amounts match, refused as a reused id when they differ), with
 * probability ≈ remembered ids / 2^64 per new id (5.4 × 10⁻¹⁴ at a million).
 */
export class RememberedGrants implements GrantMemory {
  private readonly table = new HashedGrantTable();
  private evicted = 0;

  /** `hash` is replaced only by tests, to force collisions. */
  constructor(private readonly hash: IdHasher = hashRequestId) {}

  get size(): number {
    return this.table.size;
  }

  /** Ids forgotten before their grace ended, to stay within the bound. */
  get forgottenEarly(): number {
    return this.evicted;
  }

  /** Bytes held by the table's typed arrays (outside the JavaScript heap). */
  get bytes(): number {
    return this.table.bytes;
  }

  /**
   * This memory as seen by one key of a keyed throttler: its ids are told apart from the same ids
   * of other keys (each is hashed with its key). Request ids are a client's, not a key's, so one
   * table per throttler holds them; a key's bucket can then be parked or forgotten without losing
   * what it granted, and a grant touches one warm table instead of a cold one per key. The bound a
   * key's bucket gives (from its own `max_queue_size`) is a key's share: `boundFor` turns it into
   * the whole table's (its owner knows how many keys share the table).
   */
  scoped(scope: string, boundFor: (keyBound: number) => number): GrantMemory {
    const [high, low] = scopeSeedOf(scope);
    return new ScopedGrants(this, high, low, boundFor);
  }

  /** The grant remembered for `id` (within the scope whose seeds are given: see `scoped`). */
  get(id: string, seedHigh = UNSCOPED_HIGH, seedLow = UNSCOPED_LOW): RememberedGrant | undefined {
    const bits = this.hashOf(id, seedHigh, seedLow);
    const found = this.table.find(bits[0] as number, bits[1] as number);
    if (!found) return undefined;
    const grant = { amount: found.amount, waitedMs: found.waitedMs, expiresAt: found.expiresAt };
    return Number.isNaN(found.paceStartAt) ? grant : { ...grant, pace: { startAt: found.paceStartAt, intervalMs: found.paceIntervalMs } };
  }

  /** Remembers a grant until `expiresAt`, forgetting the oldest first while `bound` or more are held. */
  remember(
    id: string,
    amount: number,
    waitedMs: number,
    expiresAt: number,
    bound: number,
    pace?: PaceSlots,
    seedHigh = UNSCOPED_HIGH,
    seedLow = UNSCOPED_LOW,
  ): void {
    while (this.table.size >= bound && this.table.slotsInUse > 0) {
      if (this.table.dropOldest()) this.evicted += 1;
    }
    const bits = this.hashOf(id, seedHigh, seedLow);
    lastHashed = null; // no id string is kept past its use
    this.table.push(bits[0] as number, bits[1] as number, amount, waitedMs, expiresAt, pace ? pace.startAt : NaN, pace ? pace.intervalMs : NaN);
  }

  /** The hash of `id` from these seeds, in the shared scratch array; not computed again when it is there already. */
  private hashOf(id: string, seedHigh: number, seedLow: number): Uint32Array {
    if (lastHashed !== id || lastSeedHigh !== seedHigh || lastSeedLow !== seedLow || lastHasher !== this.hash) {
      this.hash(id, scratch, seedHigh, seedLow);
      lastHashed = id;
      lastSeedHigh = seedHigh;
      lastSeedLow = seedLow;
      lastHasher = this.hash;
    }
    return scratch;
  }

  /** Forgets, in grant order, what passed its grace (expiries are pushed in grant order, so never decrease). */
  forgetExpired(now: number): void {
    if (this.table.oldestExpiresAt > now) return;
    while (this.table.oldestExpiresAt <= now) this.table.dropOldest();
    this.table.shrinkIfSparse();
  }
}

/** One key's view of its keyed throttler's RememberedGrants (see `scoped`): its scope's seeds, not the key. */
class ScopedGrants implements GrantMemory {
  constructor(
    private readonly shared: RememberedGrants,
    private readonly seedHigh: number,
    private readonly seedLow: number,
    private readonly boundFor: (keyBound: number) => number,
  ) {}

  get size(): number {
    return this.shared.size;
  }

  get forgottenEarly(): number {
    return this.shared.forgottenEarly;
  }

  get(id: string): RememberedGrant | undefined {
    return this.shared.get(id, this.seedHigh, this.seedLow);
  }

  remember(id: string, amount: number, waitedMs: number, expiresAt: number, bound: number, pace?: PaceSlots): void {
    this.shared.remember(id, amount, waitedMs, expiresAt, this.boundFor(bound), pace, this.seedHigh, this.seedLow);
  }

  forgetExpired(now: number): void {
    this.shared.forgetExpired(now);
  }
}
