// A leader's writes of its state as a walk of every throttler and every key computes them: the records
// of persistedThrottlers compared one by one with the last ones written (changedSince), and a
// deletion for each written record that has none now. The reference that the writes looking at
// changed keys only (src/failover/written-records.ts) must equal, write for write.
import { persistedRecordId, type PersistedKeyId, type PersistedThrottler } from "@sluice/failover-ports";
import type { Controller } from "../src/index.ts";
import { changedSince, persistedThrottlers } from "../src/failover/persisted-throttlers.ts";

/** One write: records to write, throttlers and keys to delete. */
export interface WriteOf {
  readonly throttlers: readonly PersistedThrottler[];
  readonly removedThrottlers: readonly string[];
  readonly removedKeys: readonly PersistedKeyId[];
}

export class FullWalkWrites {
  /** The last record written of each throttler and key, by persistedRecordId. */
  readonly written = new Map<string, PersistedThrottler>();

  /** What a write at `nowMs` writes; applied to `written` when `commit` (a write that failed is not). */
  write(inner: Controller, generation: number, nowMs: number, commit = true): WriteOf {
    const current = persistedThrottlers(inner, generation, nowMs);
    const throttlers: PersistedThrottler[] = [];
    for (const [id, { record, capacity }] of current) if (changedSince(this.written.get(id), record, capacity)) throttlers.push(record);
    const removed = [...this.written].filter(([id]) => !current.has(id)).map(([, record]) => record);
    const removedThrottlers = removed.filter((r) => r.key === undefined).map((r) => r.throttlerId);
    const removedKeys = removed.flatMap(({ throttlerId, key }) => (key === undefined ? [] : [{ throttlerId, key }]));
    if (commit) {
      for (const record of throttlers) this.written.set(persistedRecordId(record), record);
      for (const record of removed) this.written.delete(persistedRecordId(record));
    }
    return { throttlers, removedThrottlers, removedKeys };
  }
}

/** A write in one order, for comparing two writes whatever order each lists its records in. */
export function sortedWrite(write: WriteOf): WriteOf {
  const byId = (a: { throttlerId: string; key?: string | undefined }, b: { throttlerId: string; key?: string | undefined }) =>
    persistedRecordId(a) < persistedRecordId(b) ? -1 : persistedRecordId(a) > persistedRecordId(b) ? 1 : 0;
  return {
    throttlers: [...write.throttlers].sort(byId),
    removedThrottlers: [...write.removedThrottlers].sort(),
    removedKeys: [...write.removedKeys].sort(byId),
  };
}
