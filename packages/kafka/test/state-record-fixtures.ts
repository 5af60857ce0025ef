// Records of `<pipeline>.controller-state` at their bounds (docs/design.md §5.3), for the tests of the
// bounds here and on a broker (test/controller-state-bounds.test.ts).
import { boundedLeases, type PersistedLeases, type PersistedThrottler } from "@sluice/failover-ports";

/** A concurrency throttler's leases: `holders` holders with ids of `idLength` characters, `ids` request ids. */
export function leasesOf(holders: number, idLength: number, ids: number): PersistedLeases {
  const id = (i: number) => `${i}-`.padEnd(idLength, "x");
  const byHolder: Record<string, Record<string, number>> = {};
  for (let i = 0; i < holders; i++) byHolder[id(i)] = { default: 1 + (i % 3) };
  const requestIds = Array.from({ length: ids }, (_, i) => ({ requestId: id(i), clientId: id(i), amount: 1, waitedMs: 3, expiresAtMs: 1_700_000_060_000 }));
  return { holders: byHolder, requestIds };
}

export function concurrencyRecord(leases: PersistedLeases): PersistedThrottler {
  return { throttlerId: "tasks", balance: null, limitPerSecond: null, leases: boundedLeases(leases), generation: 1, writtenAtMs: 1_700_000_000_000 };
}
