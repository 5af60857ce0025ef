import type { Controller } from "../controller.ts";
import type { PersistedBuckets } from "./controller-state-store.ts";

/**
 * A new leader's Controller takes over what its predecessor persisted (DESIGN §7.4): the bucket
 * balances, the units concurrency holders still hold, and where the adaptive loops had got to.
 * Returns the clause of the takeover log line that says what was restored.
 */
export function restorePersistedState(inner: Controller, buckets: PersistedBuckets | null, nowMs: number): string {
  if (buckets === null) return "no persisted balances (a new pipeline): buckets start full";
  const restored = inner.restoreBalances(buckets.buckets);
  const leased = Object.entries(buckets.leases ? inner.restoreLeases(buckets.leases) : {});
  const adapted = Object.entries(buckets.adaptive ? inner.restoreAdaptive(buckets.adaptive) : {});
  const ageMs = Math.round(Math.max(0, nowMs - buckets.writtenAtMs));
  const balances = `restored ${restored.length} bucket ${restored.length === 1 ? "balance" : "balances"} persisted ${ageMs} ms ago`;
  const leases = leased.length === 0 ? "" : `; units still held by their holders: ${leased.map(([id, units]) => `${id}=${units}`).join(", ")}`;
  const limits = adapted.length === 0 ? "" : `; adaptive limits going on from: ${adapted.map(([id, limit]) => `${id}=${limit}`).join(", ")}`;
  return `${balances}${leases}${limits}`;
}
