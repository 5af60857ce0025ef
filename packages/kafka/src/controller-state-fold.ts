import { EMPTY_CONTROLLER_STATE, type ControllerState, type LeaderRecord, type PersistedSpec, type PersistedThrottler } from "@sluice/failover-ports";
import { bucketKey, decodeStateRecord, stateKeyOf } from "./controller-state-records.ts";

interface Entry<T> {
  readonly offset: number;
  /** null: deleted (a tombstone), kept so that an older record read again cannot come back. */
  readonly value: T | null;
}

/**
 * The state as the records of `<pipeline>.controller-state` make it (docs/design.md §5.3): the latest
 * committed record of each key, by offset. A record read again (a reader that starts over from
 * offset 0) never replaces one of a higher offset, so the state never goes back while a reader
 * re-reads, and a reader that reads everything again converges to the same state.
 */
export class ControllerStateFold {
  private spec: Entry<PersistedSpec> | null = null;
  private leader: Entry<LeaderRecord> | null = null;
  /** By Kafka key (`bucket/<id>`, `bucket/<id>/<key>`), as compaction keeps them. */
  private readonly throttlers = new Map<string, Entry<PersistedThrottler>>();
  private cached: ControllerState | null = EMPTY_CONTROLLER_STATE;

  constructor(private readonly log: (line: string) => void = () => {}) {}

  /** Applies the record at `offset`; returns whether it changed the state. */
  apply(offset: number, key: string | null, value: string | null): boolean {
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
        if (!this.setThrottler(stateKeyOf(decoded.record), offset, decoded.record)) return false;
        break;
      case "deleted":
        if (!this.setThrottler(decoded.stateKey, offset, null)) return false;
        break;
      case "legacy-buckets": {
        let changed = false;
        for (const record of decoded.records) changed = this.setThrottler(bucketKey(record.throttlerId), offset, record) || changed;
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
      if (!value) continue;
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

  private setThrottler(key: string, offset: number, value: PersistedThrottler | null): boolean {
    if (!newer(this.throttlers.get(key) ?? null, offset)) return false;
    this.throttlers.set(key, { offset, value });
    return true;
  }
}

function newer(current: Entry<unknown> | null, offset: number): boolean {
  return current === null || offset > current.offset;
}
