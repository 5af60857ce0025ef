import { MinHeap } from "@sluice/core";
import type { PersistedKeyId, PersistedThrottler } from "@sluice/failover-ports";
import type { Controller } from "../quota/controller.ts";
import { changedSince, keyRecordOf, throttlerRecords, type ThrottlerNow } from "./persisted-throttlers.ts";

// What a leader wrote of `<pipeline>.controller-state` and what its next write must change
// (docs/design.md §5.3). A write looks at every throttler's own record (there are few) but only at
// the keys of keyed throttlers that may have changed since the last write: those the controller
// marked (a grant, a release, a lease, a parking, a forgetting, a restore: KeyedRecordSource), and
// those whose written balance has refilled to full by time alone, which nothing marks: each written
// balance's refill time is kept in a heap, and a key is looked at once its time has come, so its
// record is deleted by the first write after it is full, as a walk of every key would. A takeover's
// first write, a new Controller and a reconfigured keyed throttler look at every key.

const NONE: ReadonlySet<string> = new Set();

interface WrittenKey {
  record: PersistedThrottler;
  /** The time of its entry in `refills` (a little before its balance is full), if it has one. */
  refillAtMs: number | undefined;
}

interface Refill {
  readonly atMs: number;
  readonly throttlerId: string;
  readonly key: string;
}

/** One write's changes (`changes`), applied to what was written once committed (`committed`). */
export interface RecordChanges {
  readonly throttlers: PersistedThrottler[];
  readonly removedThrottlers: string[];
  readonly removedKeys: PersistedKeyId[];
  /** Keys of keyed throttlers this write looked at: what it cost beside the throttlers' own records. */
  readonly keysVisited: number;
  /** Each key looked at with its record now (undefined: it has none). */
  readonly visited: readonly { readonly throttlerId: string; readonly key: string; readonly now: ThrottlerNow | undefined }[];
}

export class WrittenRecords {
  /** The last record written (or taken over) of each throttler, and of each key by throttler id: what a successor would restore. */
  private readonly throttlers = new Map<string, PersistedThrottler>();
  private readonly keys = new Map<string, Map<string, WrittenKey>>();
  private readonly refills = new MinHeap<Refill>((a, b) => a.atMs < b.atMs);
  /**
   * Keys the next write looks at beyond those the controller marks since: due to refill, or looked
   * at by a write that did not commit. Null for a throttler: every key of it; "all": every key.
   */
  private pending: Map<string, Set<string> | null> | "all" = "all";
  /** The Controller whose changes were taken last: another one's keys are all looked at. */
  private source: Controller | null = null;

  /**
   * A takeover read these records: each is rewritten by the first write (a rate that equals nothing
   * makes changedSince find it changed), and those of throttlers and keys with no record now are deleted.
   */
  tookOver(records: Iterable<PersistedThrottler>): void {
    this.throttlers.clear();
    this.keys.clear();
    this.refills.retain(() => false);
    for (const record of records) {
      const rewritten = { ...record, limitPerSecond: Number.NaN };
      if (record.key === undefined) this.throttlers.set(record.throttlerId, rewritten);
      else this.keysOf(record.throttlerId).set(record.key, { record: rewritten, refillAtMs: undefined });
    }
    this.pending = "all";
    this.source = null;
  }

  /** What the next write of `inner`'s state at `nowMs` must write and delete; nothing is applied until `committed`. */
  changes(inner: Controller, generation: number, nowMs: number): RecordChanges {
    if (inner !== this.source) {
      this.source = inner;
      this.pending = "all";
    }
    const source = inner.keyedRecords();
    const marked = source.changedKeys();
    this.takeDueRefills(nowMs);
    this.merge(marked);
    const throttlers: PersistedThrottler[] = [];
    const current = throttlerRecords(inner, generation, nowMs);
    for (const [id, { record, capacity }] of current) if (changedSince(this.throttlers.get(id), record, capacity)) throttlers.push(record);
    const removedThrottlers = [...this.throttlers.keys()].filter((id) => !current.has(id));
    const removedKeys: PersistedKeyId[] = [];
    const visited: RecordChanges["visited"][number][] = [];
    const look = (throttlerId: string, key: string, now: ThrottlerNow | undefined) => {
      visited.push({ throttlerId, key, now });
      const last = this.keys.get(throttlerId)?.get(key);
      if (now === undefined) {
        if (last) removedKeys.push({ throttlerId, key });
      } else if (changedSince(last?.record, now.record, now.capacity)) throttlers.push(now.record);
    };
    for (const throttlerId of marked.keys()) {
      const keys = this.pending === "all" ? null : this.pending.has(throttlerId) ? (this.pending.get(throttlerId) ?? null) : NONE;
      if (keys === null) {
        const states = source.keyStates(throttlerId);
        for (const [key, state] of states) look(throttlerId, key, keyRecordOf(throttlerId, key, state, generation, nowMs));
        for (const key of this.keys.get(throttlerId)?.keys() ?? []) if (!states.has(key)) look(throttlerId, key, undefined);
        continue;
      }
      for (const key of keys) {
        const state = source.keyState(throttlerId, key);
        look(throttlerId, key, state && keyRecordOf(throttlerId, key, state, generation, nowMs));
      }
    }
    // Keyed throttlers no longer declared (or no longer keyed): every record of their keys goes.
    for (const [throttlerId, keys] of this.keys) {
      if (!marked.has(throttlerId)) for (const key of keys.keys()) removedKeys.push({ throttlerId, key });
    }
    return { throttlers, removedThrottlers, removedKeys, keysVisited: visited.length, visited };
  }

  /** `changes` were written (or there was nothing to write): they are what a successor reads now. */
  committed(changes: RecordChanges, nowMs: number): void {
    for (const record of changes.throttlers) {
      if (record.key === undefined) {
        this.throttlers.set(record.throttlerId, record);
        continue;
      }
      const keys = this.keysOf(record.throttlerId);
      const last = keys.get(record.key);
      // Its refill entry stays: a key written again is looked at no later than it was to be.
      if (last) last.record = record;
      else keys.set(record.key, { record, refillAtMs: undefined });
    }
    for (const id of changes.removedThrottlers) this.throttlers.delete(id);
    for (const { throttlerId, key } of changes.removedKeys) {
      const keys = this.keys.get(throttlerId);
      keys?.delete(key);
      if (keys?.size === 0) this.keys.delete(throttlerId);
    }
    for (const { throttlerId, key, now } of changes.visited) {
      const written = this.keys.get(throttlerId)?.get(key);
      if (written && now) this.scheduleRefill(throttlerId, key, written, now, nowMs);
    }
    this.pending = new Map();
  }

  private keysOf(throttlerId: string): Map<string, WrittenKey> {
    let keys = this.keys.get(throttlerId);
    if (!keys) this.keys.set(throttlerId, (keys = new Map()));
    return keys;
  }

  /**
   * Looks at a written key again when its balance, as it is now, will have refilled to its capacity
   * with nothing else happening: a millisecond early, so that rounding never makes it late (looked at
   * early, it is scheduled again). A key already due earlier keeps that time.
   */
  private scheduleRefill(throttlerId: string, key: string, written: WrittenKey, { record, capacity }: ThrottlerNow, nowMs: number): void {
    const rate = record.limitPerSecond;
    if (!record.balance || capacity === null || rate === null || !(rate > 0)) return;
    const fullAtMs = record.balance.atMs + ((capacity - record.balance.balance) * 1000) / rate;
    const atMs = Math.max(nowMs, fullAtMs - 1);
    if (!Number.isFinite(atMs) || (written.refillAtMs !== undefined && written.refillAtMs <= atMs)) return;
    written.refillAtMs = atMs;
    this.refills.push({ atMs, throttlerId, key });
  }

  /** Keys whose refill time has come join the pending ones (an entry replaced by an earlier one is skipped). */
  private takeDueRefills(nowMs: number): void {
    for (let top = this.refills.peek(); top !== undefined && top.atMs <= nowMs; top = this.refills.peek()) {
      this.refills.pop();
      const written = this.keys.get(top.throttlerId)?.get(top.key);
      if (!written || written.refillAtMs !== top.atMs) continue;
      written.refillAtMs = undefined;
      this.addPending(top.throttlerId, [top.key]);
    }
  }

  private merge(marked: ReadonlyMap<string, ReadonlySet<string> | null>): void {
    for (const [throttlerId, keys] of marked) {
      if (keys === null) {
        if (this.pending !== "all") this.pending.set(throttlerId, null);
      } else if (keys.size > 0) this.addPending(throttlerId, keys);
    }
  }

  private addPending(throttlerId: string, keys: Iterable<string>): void {
    if (this.pending === "all") return;
    let pending = this.pending.get(throttlerId);
    if (pending === null) return;
    if (!pending) this.pending.set(throttlerId, (pending = new Set()));
    for (const key of keys) pending.add(key);
  }
}
