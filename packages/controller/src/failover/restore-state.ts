import type { ControllerState, PersistedAdaptive, PersistedLeases } from "@sluice/failover-ports";
import type { BucketBalance, Controller } from "../quota/controller.ts";

/**
 * A new leader's Controller takes over what its predecessor persisted (docs/design.md §5.2, §5.3): where
 * the adaptive loops had got to, the units concurrency holders still hold, and the bucket balances.
 * The adaptive limits come first, so each bucket already has the capacity in force when its balance
 * is set; the downtime accrues at the rate in force when the record was written (an adaptive limit
 * included), capped at the bucket. A keyed throttler's keys continue from their records (a key in
 * debt stays in debt, a key's held units stay in use); a key without a record was full (nothing
 * held) or forgotten, and starts full as it would have. Returns the clause of the takeover log line
 * that says what was restored.
 */
export function restorePersistedState(inner: Controller, state: Pick<ControllerState, "throttlers" | "keys">, nowMs: number): string {
  const records = state.throttlers;
  if (records.size === 0 && state.keys.size === 0) return "no persisted balances (a new pipeline): buckets start full";
  const adaptive: Record<string, PersistedAdaptive> = Object.create(null) as Record<string, PersistedAdaptive>;
  const leases: Record<string, PersistedLeases> = Object.create(null) as Record<string, PersistedLeases>;
  const balances: Record<string, BucketBalance> = Object.create(null) as Record<string, BucketBalance>;
  let newest = Number.NEGATIVE_INFINITY;
  for (const [id, record] of records) {
    if (record.adaptive) adaptive[id] = record.adaptive;
    if (record.leases) leases[id] = record.leases;
    if (record.balance) balances[id] = accrued(record.balance, record.limitPerSecond, nowMs);
    newest = Math.max(newest, record.writtenAtMs);
  }
  const adapted = Object.entries(inner.restoreAdaptive(adaptive));
  const leased: [string, number][] = Object.entries(inner.restoreLeases(leases));
  const restored = inner.restoreBalances(balances);
  let keys = 0;
  for (const [throttlerId, ofThrottler] of state.keys) {
    const leasesByKey = new Map<string, PersistedLeases>();
    for (const [key, record] of ofThrottler) {
      newest = Math.max(newest, record.writtenAtMs);
      if (record.leases) leasesByKey.set(key, record.leases);
      if (!record.balance) continue;
      const { balance, atMs } = accrued(record.balance, record.limitPerSecond, nowMs);
      if (inner.restoreKeyedBalance(throttlerId, key, balance, atMs)) keys++;
    }
    if (leasesByKey.size === 0) continue;
    // Own properties whatever the keys (a key "__proto__" is one like any other).
    const units = inner.restoreKeyedLeases(throttlerId, Object.fromEntries(leasesByKey));
    if (units !== null) leased.push([`${throttlerId} (${leasesByKey.size} ${leasesByKey.size === 1 ? "key" : "keys"})`, units]);
  }
  // The predecessor's last write: an idle throttler's record may be older, and is exact all the same.
  const ageMs = Math.round(Math.max(0, nowMs - newest));
  const ofKeys = keys === 0 ? "" : ` and ${keys} key ${keys === 1 ? "balance" : "balances"} of keyed throttlers`;
  const summary = `restored ${restored.length} bucket ${restored.length === 1 ? "balance" : "balances"}${ofKeys} persisted ${ageMs} ms ago`;
  const held = leased.length === 0 ? "" : `; units still held by their holders: ${leased.map(([id, units]) => `${id}=${units}`).join(", ")}`;
  const limits = adapted.length === 0 ? "" : `; adaptive limits going on from: ${adapted.map(([id, limit]) => `${id}=${limit}`).join(", ")}`;
  return `${summary}${held}${limits}`;
}

/**
 * The balance now of a bucket persisted at `atMs` that refilled at `limitPerSecond`: as of now, so
 * the bucket adds nothing at its own (possibly different) limit; it caps the result at its capacity.
 * A record that does not say its rate (written before it was persisted) accrues at the bucket's.
 */
function accrued(balance: { readonly balance: number; readonly atMs: number }, limitPerSecond: number | null, nowMs: number): BucketBalance {
  if (limitPerSecond === null || !Number.isFinite(limitPerSecond)) return balance;
  const downtimeMs = Math.max(0, nowMs - balance.atMs);
  return { balance: balance.balance + (limitPerSecond * downtimeMs) / 1000, atMs: nowMs };
}
