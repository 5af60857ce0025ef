import { EMPTY_CONTROLLER_STATE, type ControllerState, type LeaderRecord, type PersistedSpec, type PersistedThrottler } from "@sluice/failover-ports";
import { bucketKey, decodeStateRecord, STATE_KEYS, stateKeyOf } from "./controller-state-records.ts";

interface Entry<T> {
  readonly offset: number;
  readonly value: T;
}

interface ThrottlerEntry extends Entry<PersistedThrottler> {
  /** The Kafka key the record was read at: its own key, or a misplaced one (see `misplaced`). */
  readonly from: string;
}

/**
 * The state as the records of `<pipeline>.controller-state` make it (docs/design.md §5.3): the latest
 * committed record of each key, by offset. A record read again (a reader that starts over from
 * offset 0) never replaces one of a higher offset, so the state never goes back while a reader
 * re-reads, and a reader that reads everything again converges to the same state. A record deleted
 * by a tombstone leaves nothing behind (keys come and go by the hundred thousand): a record read
 * again at or below the highest offset read whose key holds nothing was deleted since.
 */
export class ControllerStateFold {
  private spec: Entry<PersistedSpec> | null = null;
  private leader: Entry<LeaderRecord> | null = null;
  /** By the record's own Kafka key (`bucket/<id>`, `bucket/<id>/<key>`, stateKeyOf), as compaction keeps them: live records only. */
  private readonly throttlers = new Map<string, ThrottlerEntry>();
  /**
   * The highest offset applied before the record being applied. Records come in offset order but
   * when a reader starts over; a record at or below it is one read before, so one whose key holds
   * nothing now was deleted by a later tombstone and must not come back.
   */
  private readUpTo = -1;
  /**
   * Kafka keys whose latest record is not at its own key: written before throttler ids were escaped
   * in Kafka keys (an id with `%` or `/`). By Kafka key, the own key of the record it holds. Such a
   * record is read by its value; a later record or tombstone at the same Kafka key ends it, and the
   * store deletes the misplaced key when it writes the record's own (misplacedKeys).
   */
  private readonly misplaced = new Map<string, { readonly ownKey: string; readonly offset: number }>();
  /**
   * The offset of the latest record (or tombstone) read at each Kafka key that ever held a misplaced
   * record, kept after it is ended: a re-read of that record must not make the key misplaced again.
   * Only old records are misplaced (writers write every record at its own key), so this is bounded by
   * them, not by every key ever read; a record at its own key is checked by the offset of the entry
   * at that key, which only ever grows.
   */
  private readonly latestAt = new Map<string, number>();
  private cached: ControllerState | null = EMPTY_CONTROLLER_STATE;

  constructor(private readonly log: (line: string) => void = () => {}) {}

  /** Applies the record at `offset`; returns whether it changed the state. */
  apply(offset: number, key: string | null, value: string | null): boolean {
    const changed = this.applyRecord(offset, key, value);
    if (offset > this.readUpTo) this.readUpTo = offset;
    return changed;
  }

  /** Live records of throttlers and keys held: deleted ones leave nothing. */
  get recordCount(): number {
    return this.throttlers.size;
  }

  private applyRecord(offset: number, key: string | null, value: string | null): boolean {
    const decoded = decodeStateRecord(key, value);
    switch (decoded.kind) {
      case "spec":
        if (!newer(this.spec, offset)) return false;
        this.spec = { offset, value: decoded.record };
        break;
      case "leader":
        if (!newer(this.leader, offset)) return false;
        this.leader = { offset, value: decoded.record };
        break;
      case "throttler":
        if (!this.applyAt(key ?? "", offset, decoded.record)) return false;
        break;
      case "deleted":
        if (!this.applyAt(decoded.stateKey, offset, null)) return false;
        break;
      case "legacy-buckets": {
        let changed = false;
        for (const record of decoded.records) changed = this.setThrottler(bucketKey(record.throttlerId), offset, record, STATE_KEYS.legacyBuckets) || changed;
        if (!changed) return false;
        break;
      }
      default:
        this.log(`ignored the record at offset ${offset}: ${decoded.reason}`);
        return false;
    }
    this.cached = null;
    return true;
  }

  state(): ControllerState {
    if (this.cached) return this.cached;
    const throttlers = new Map<string, PersistedThrottler>();
    const keys = new Map<string, Map<string, PersistedThrottler>>();
    for (const { value } of this.throttlers.values()) {
      if (value.key === undefined) {
        throttlers.set(value.throttlerId, value);
        continue;
      }
      let ofThrottler = keys.get(value.throttlerId);
      if (!ofThrottler) keys.set(value.throttlerId, (ofThrottler = new Map()));
      ofThrottler.set(value.key, value);
    }
    this.cached = { spec: this.spec?.value ?? null, throttlers, keys, leader: this.leader?.value ?? null };
    return this.cached;
  }

  /** The Kafka keys holding a record that is not at its own key, with that own key (see `misplaced`). */
  misplacedKeys(): ReadonlyMap<string, string> {
    return new Map([...this.misplaced].map(([kafkaKey, { ownKey }]) => [kafkaKey, ownKey]));
  }

  /**
   * A record (null: a tombstone) at Kafka key `kafkaKey`. Kafka keeps one record per Kafka key, so
   * whatever a misplaced key held before is gone; a tombstone deletes the record whose own key it is
   * when that record was read at this Kafka key.
   */
  private applyAt(kafkaKey: string, offset: number, record: PersistedThrottler | null): boolean {
    // A record read again (a reader that starts over) changes nothing: not even what its Kafka key holds.
    const last = this.latestAt.get(kafkaKey);
    if (last !== undefined && last >= offset) return false;
    const ownKey = record ? stateKeyOf(record) : kafkaKey;
    if (last !== undefined || ownKey !== kafkaKey) this.latestAt.set(kafkaKey, offset);
    const before = this.misplaced.get(kafkaKey);
    let changed = false;
    if (before) {
      this.misplaced.delete(kafkaKey);
      const held = this.throttlers.get(before.ownKey);
      if (held?.from === kafkaKey && before.ownKey !== ownKey) changed = this.setThrottler(before.ownKey, offset, null, kafkaKey);
    }
    if (ownKey !== kafkaKey) {
      this.misplaced.set(kafkaKey, { ownKey, offset });
      // The record this Kafka key held at its own key before is overwritten by the misplaced one.
      const held = this.throttlers.get(kafkaKey);
      if (held?.from === kafkaKey) changed = this.setThrottler(kafkaKey, offset, null, kafkaKey) || changed;
    }
    // A tombstone deletes only what its own Kafka key held (Kafka's semantics): a record read at its
    // own key from another (misplaced) Kafka key is still held there.
    if (record === null) {
      const held = this.throttlers.get(ownKey);
      if (held !== undefined && held.from !== kafkaKey) return changed;
    }
    return this.setThrottler(ownKey, offset, record, kafkaKey) || changed;
  }

  /** Sets (or with null deletes) the record at own key `key`, unless what it holds is newer than `offset`. */
  private setThrottler(key: string, offset: number, value: PersistedThrottler | null, from: string): boolean {
    const held = this.throttlers.get(key);
    if (held ? offset <= held.offset : offset <= this.readUpTo) return false;
    if (value === null) return this.throttlers.delete(key);
    this.throttlers.set(key, { offset, value, from });
    return true;
  }
}

function newer(current: Entry<unknown> | null, offset: number): boolean {
  return current === null || offset > current.offset;
}
