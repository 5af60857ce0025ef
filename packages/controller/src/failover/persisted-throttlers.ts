import type { Controller, PersistedKeyState } from "../quota/controller.ts";
import { type PersistedThrottler, boundedLeases, persistedRecordId } from "@sluice/failover-ports";

/** One record as it would be written now, with its bucket's capacity. */
export interface ThrottlerNow {
  readonly record: PersistedThrottler;
  /** The bucket's capacity now (what a balance accrues up to); null when it has none. */
  readonly capacity: number | null;
}

/**
 * What a leader persists of each throttler now (docs/design.md §5.3): one record per throttler with its
 * balance, the rate it refills at, its leases (within the bounds of state-bounds.ts) and its
 * adaptive loop's state. Throttlers with none of these (unlimited, nothing held) have no record.
 * A keyed throttler has one record per key whose bucket is not full or whose units are held
 * (§9.1, §9.2): a full key with nothing held is the same as a forgotten one, so the state grows
 * with the keys in debt or in use, not with every key seen.
 * By persistedRecordId. This is the walk of every key; a leader's writes look at the keys that
 * changed only (written-records.ts) and arrive at the same records.
 */
export function persistedThrottlers(inner: Controller, generation: number, nowMs: number): Map<string, ThrottlerNow> {
  const out = new Map<string, ThrottlerNow>();
  for (const now of throttlerRecords(inner, generation, nowMs).values()) out.set(persistedRecordId(now.record), now);
  // A key of a keyed concurrency throttler has a record while units of it are held (or request
  // ids are to be answered again): its holders, within the same bounds as a throttler's.
  for (const [throttlerId, byKey] of inner.keyedLeaseState()) {
    for (const [key, held] of Object.entries(byKey)) {
      const now = keyRecordOf(throttlerId, key, { leases: held }, generation, nowMs);
      if (now) out.set(persistedRecordId(now.record), now);
    }
  }
  for (const [throttlerId, keys] of inner.keyedBalances()) {
    for (const [key, balance] of keys) {
      const now = keyRecordOf(throttlerId, key, { balance }, generation, nowMs);
      if (now) out.set(persistedRecordId(now.record), now);
    }
  }
  return out;
}

/** The records of the throttlers themselves (not of keys), by throttler id: what persistedThrottlers has of them. */
export function throttlerRecords(inner: Controller, generation: number, nowMs: number): Map<string, ThrottlerNow> {
  const balances = inner.bucketBalances();
  const leases = inner.leaseState();
  const adaptive = inner.adaptiveState();
  const out = new Map<string, ThrottlerNow>();
  const ids = new Set([...Object.keys(balances), ...Object.keys(leases), ...Object.keys(adaptive)]);
  for (const throttlerId of ids) {
    const balance = Object.hasOwn(balances, throttlerId) ? balances[throttlerId] : undefined;
    const held = Object.hasOwn(leases, throttlerId) ? leases[throttlerId] : undefined;
    const loop = Object.hasOwn(adaptive, throttlerId) ? adaptive[throttlerId] : undefined;
    const record: PersistedThrottler = {
      throttlerId,
      balance: balance ? { balance: balance.balance, atMs: balance.atMs } : null,
      limitPerSecond: balance?.limitPerSecond ?? null,
      ...(held ? { leases: boundedLeases(held) } : {}),
      ...(loop ? { adaptive: loop } : {}),
      generation,
      writtenAtMs: nowMs,
    };
    out.set(throttlerId, { record, capacity: balance?.capacity ?? null });
  }
  return out;
}

/**
 * The record of one key of keyed throttler `throttlerId` now, from what it persists (its leases, or
 * its balance); undefined when it has none: a rate key whose bucket is full (or unlimited).
 */
export function keyRecordOf(throttlerId: string, key: string, state: PersistedKeyState, generation: number, nowMs: number): ThrottlerNow | undefined {
  if (state.leases) {
    const record: PersistedThrottler = {
      throttlerId,
      key,
      balance: null,
      limitPerSecond: null,
      leases: boundedLeases(state.leases),
      generation,
      writtenAtMs: nowMs,
    };
    return { record, capacity: null };
  }
  const { balance } = state;
  const limitPerSecond = balance.limitPerSecond ?? null;
  const capacity = balance.capacity ?? null;
  if (capacity === null || fullAt(balance.balance, balance.atMs, limitPerSecond, capacity, nowMs)) return undefined;
  const record: PersistedThrottler = {
    throttlerId,
    key,
    balance: { balance: balance.balance, atMs: balance.atMs },
    limitPerSecond,
    generation,
    writtenAtMs: nowMs,
  };
  return { record, capacity };
}

/** Whether a balance read at `atMs` has accrued to its capacity by `nowMs` (a parked key's is older than now). */
function fullAt(balance: number, atMs: number, limitPerSecond: number | null, capacity: number, nowMs: number): boolean {
  const accrued = balance + ((limitPerSecond ?? 0) * Math.max(0, nowMs - atMs)) / 1000;
  return accrued >= capacity;
}

/**
 * Whether `next` says something a successor could not work out from `last` (the record written
 * before): its leases or adaptive state changed, its rate changed, or its balance is not what
 * `last` accrues to by now (a grant or a release happened). An unchanged bucket is not rewritten,
 * so an idle throttler costs nothing per write however many there are.
 */
export function changedSince(last: PersistedThrottler | undefined, next: PersistedThrottler, capacity: number | null): boolean {
  if (!last) return true;
  if (last.limitPerSecond !== next.limitPerSecond) return true;
  if (JSON.stringify(last.leases ?? null) !== JSON.stringify(next.leases ?? null)) return true;
  if (JSON.stringify(last.adaptive ?? null) !== JSON.stringify(next.adaptive ?? null)) return true;
  if (last.balance === null || next.balance === null) return last.balance !== next.balance;
  const accrued = last.balance.balance + ((next.limitPerSecond ?? 0) * Math.max(0, next.balance.atMs - last.balance.atMs)) / 1000;
  const predicted = capacity === null ? accrued : Math.min(capacity, accrued);
  return Math.abs(predicted - next.balance.balance) > 1e-9 * Math.max(1, Math.abs(next.balance.balance), capacity ?? 0);
}
