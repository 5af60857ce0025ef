import type { PersistedLeases, PersistedRequestId } from "./persisted-leases.ts";

// The documented bounds of one record of `<pipeline>.controller-state` (docs/design.md §5.3): a record
// never grows with the number of throttlers (one record each), and a concurrency throttler's record
// keeps at most these many holders and request ids, whatever its grant rate. Sizes are of the JSON
// before compression; packages/kafka refuses to write a record over STATE_RECORD_MAX_BYTES.

/** Holders listed by name in a concurrency throttler's record; the units of the rest are summed under UNLISTED_HOLDER. */
export const PERSISTED_HOLDERS_MAX = 10_000;
/** JSON bytes the listed holders of one record may take (ids are up to 1,024 characters). */
export const PERSISTED_HOLDERS_MAX_BYTES = 1024 * 1024;
/**
 * Newest request ids kept in one record (older ones are answered as new requests after a failover):
 * a replay that reaches a successor comes from a client retrying within seconds of the failover, so
 * the newest ids are the ones that matter.
 */
export const PERSISTED_REQUEST_IDS_MAX = 1_000;
/** JSON bytes the request ids of one record may take. */
export const PERSISTED_REQUEST_IDS_MAX_BYTES = 512 * 1024;
/** The most JSON bytes of one record: the two budgets above plus room for the rest (adaptive state, balance). */
export const STATE_RECORD_MAX_BYTES = 2 * 1024 * 1024;

/**
 * The holder that stands for every holder left out of a record: a successor counts their units in
 * use for one lease_timeout (nobody renews it), so leaving names out never frees units still held.
 * NUL cannot appear in the ids Sluice's clients make.
 */
export const UNLISTED_HOLDER = "\u0000unlisted";

/** The leases of one throttler within the bounds: the largest holders by name, the rest summed; the newest request ids. */
export function boundedLeases(leases: PersistedLeases): PersistedLeases {
  return { holders: boundedHolders(leases.holders), requestIds: boundedRequestIds(leases.requestIds) };
}

function boundedHolders(holders: PersistedLeases["holders"]): PersistedLeases["holders"] {
  const entries = Object.entries(holders);
  if (entries.length <= PERSISTED_HOLDERS_MAX && jsonBytes(holders) <= PERSISTED_HOLDERS_MAX_BYTES) return holders;
  const total = (byClass: Readonly<Record<string, number>>) => Object.values(byClass).reduce((sum, units) => sum + units, 0);
  entries.sort((a, b) => total(b[1]) - total(a[1]));
  const listed: [string, Readonly<Record<string, number>>][] = [];
  const unlisted = new Map<string, number>();
  let bytes = 2;
  for (const [clientId, byClass] of entries) {
    const size = jsonBytes(clientId) + jsonBytes(byClass) + 2;
    if (listed.length < PERSISTED_HOLDERS_MAX - 1 && bytes + size <= PERSISTED_HOLDERS_MAX_BYTES - 4096) {
      listed.push([clientId, byClass]);
      bytes += size;
    } else {
      for (const [classId, units] of Object.entries(byClass)) unlisted.set(classId, (unlisted.get(classId) ?? 0) + units);
    }
  }
  // The unlisted holder's classes are the throttler's own (few): its entry fits the 4 KiB kept for it.
  if (unlisted.size > 0) listed.push([UNLISTED_HOLDER, Object.fromEntries(unlisted)]);
  return Object.fromEntries(listed);
}

function boundedRequestIds(ids: readonly PersistedRequestId[]): readonly PersistedRequestId[] {
  const kept: PersistedRequestId[] = [];
  let bytes = 2;
  for (let i = ids.length - 1; i >= 0 && kept.length < PERSISTED_REQUEST_IDS_MAX; i--) {
    const id = ids[i]!;
    bytes += jsonBytes(id.requestId) + jsonBytes(id.clientId) + 100;
    if (bytes > PERSISTED_REQUEST_IDS_MAX_BYTES) break;
    kept.push(id);
  }
  return kept.length === ids.length ? ids : kept.reverse();
}

function jsonBytes(value: unknown): number {
  return Buffer.byteLength(JSON.stringify(value), "utf8");
}
