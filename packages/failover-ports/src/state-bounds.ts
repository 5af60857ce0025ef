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
/**
 * JSON bytes the holders' silences (`silentMs`) of one record may take: the longest silences are
 * kept (the holders nearest to losing their lease); a holder whose silence is left out gets a full
 * lease_timeout from the successor, as every holder did before silences were persisted.
 */
export const PERSISTED_SILENCES_MAX_BYTES = 256 * 1024;
/** The most JSON bytes of one record: the three budgets above plus room for the rest (adaptive state, balance). */
export const STATE_RECORD_MAX_BYTES = 2 * 1024 * 1024;

/**
 * The holder that stands for every holder left out of a record: a successor counts their units in
 * use for one lease_timeout (nobody renews it), so leaving names out never frees units still held.
 * NUL cannot appear in the ids Sluice's clients make.
 */
export const UNLISTED_HOLDER = "\u0000unlisted";

/** The leases of one throttler within the bounds: the largest holders by name, the rest summed; the newest request ids. */
export function boundedLeases(leases: PersistedLeases): PersistedLeases {
  const holders = boundedHolders(leases.holders);
  const silentMs = leases.silentMs ? boundedSilences(leases.holders, holders, leases.silentMs) : undefined;
  return { holders, requestIds: boundedRequestIds(leases.requestIds), ...(silentMs ? { silentMs } : {}) };
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

/**
 * The silences of the listed holders, longest first within their budget. The unlisted holder gets
 * the shortest silence of those it stands for (the longest lease any of them has left).
 */
function boundedSilences(
  all: PersistedLeases["holders"],
  listedHolders: PersistedLeases["holders"],
  silentMs: Readonly<Record<string, number>>,
): Record<string, number> | undefined {
  const silenceOf = (clientId: string) => (Object.hasOwn(silentMs, clientId) ? (silentMs[clientId] ?? 0) : 0);
  const listed: [string, number][] = [];
  for (const clientId of Object.keys(listedHolders)) {
    const silence = clientId === UNLISTED_HOLDER && !Object.hasOwn(all, UNLISTED_HOLDER) ? unlistedSilence(all, listedHolders, silenceOf) : silenceOf(clientId);
    if (silence > 0) listed.push([clientId, silence]);
  }
  if (listed.length === 0) return undefined;
  if (jsonBytes(Object.fromEntries(listed)) <= PERSISTED_SILENCES_MAX_BYTES) return Object.fromEntries(listed);
  listed.sort((a, b) => b[1] - a[1]);
  const kept: [string, number][] = [];
  let bytes = 2;
  for (const [clientId, silence] of listed) {
    bytes += jsonBytes(clientId) + jsonBytes(silence) + 2;
    if (bytes > PERSISTED_SILENCES_MAX_BYTES) break;
    kept.push([clientId, silence]);
  }
  return kept.length > 0 ? Object.fromEntries(kept) : undefined;
}

function unlistedSilence(all: PersistedLeases["holders"], listedHolders: PersistedLeases["holders"], silenceOf: (clientId: string) => number): number {
  let shortest = Number.POSITIVE_INFINITY;
  for (const clientId of Object.keys(all)) if (!Object.hasOwn(listedHolders, clientId)) shortest = Math.min(shortest, silenceOf(clientId));
  return Number.isFinite(shortest) ? shortest : 0;
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
