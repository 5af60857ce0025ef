import type { LeaderRecord, PersistedSpec, PersistedThrottler } from "@sluice/failover-ports";
import { decodeAdaptive, encodeAdaptive } from "./controller-state-adaptive.ts";
import { decodeLeases, encodeLeases } from "./controller-state-leases.ts";
import { finite, isObject } from "./controller-state-values.ts";

// The records of `<pipeline>.controller-state` (docs/design.md §5.3), JSON values in the spec's snake_case
// so an operator can read them with any console consumer:
//   spec                      { "version", "dynamic_spec_json", "generation", "written_at_ms" }
//   leader                    { "address", "member_id", "generation", "since_ms" }
//   bucket/<throttler id>     { "throttler", "balance", "at_ms", "limit_per_s", "leases", "adaptive",
//                               "generation", "written_at_ms" }
//   bucket/<throttler id>/<key>
//                             { "throttler", "key", "balance", "at_ms", "limit_per_s", "leases",
//                               "generation", "written_at_ms" }   one key of a keyed throttler whose
//                               bucket is not full or whose units are held
// In the Kafka keys the throttler id is written with `%` as `%25` and `/` as `%2F` (the key as it is),
// so the first `/` after `bucket/` always ends the id: a throttler "a/b" and the key "b" of a keyed
// throttler "a" get two records, not one (parseBucketKey reads a Kafka key back). An id without `%`
// or `/` is written as it is, as it was before it was escaped.
// A record's identity is in its value ("throttler", and "key" for a key): the Kafka key only makes it
// one per compaction. A value of null (a tombstone) deletes the record of its Kafka key: a removed
// throttler's, or a key's that was forgotten or is full again. `generation` is informative only:
// the order of the records is their offset. Records of the keys before §9.1 (`dynamic_spec`, one
// `buckets` for every throttler) are still read, so an upgrade is not a free bucket.

export const STATE_KEYS = { spec: "spec", leader: "leader", bucketPrefix: "bucket/", legacySpec: "dynamic_spec", legacyBuckets: "buckets" } as const;

export function controllerStateTopic(pipeline: string): string {
  return `${pipeline}.controller-state`;
}

export function controllerGroupId(pipeline: string): string {
  return `${pipeline}.controller`;
}

/** The transactional id of the state's one writer: every leader of the pipeline claims it in turn. */
export function controllerWriterId(pipeline: string): string {
  return `${pipeline}.controller`;
}

/** A throttler id in a Kafka key: no `/` left in it, so the key's `/` is the only separator. */
function escapeId(throttlerId: string): string {
  return throttlerId.replaceAll("%", "%25").replaceAll("/", "%2F");
}

function unescapeId(escaped: string): string {
  return escaped.replace(/%2F|%25/g, (code) => (code === "%2F" ? "/" : "%"));
}

export function bucketKey(throttlerId: string): string {
  return `${STATE_KEYS.bucketPrefix}${escapeId(throttlerId)}`;
}

/** The Kafka key of a key's record of a keyed throttler. */
export function keyBucketKey(throttlerId: string, key: string): string {
  return `${STATE_KEYS.bucketPrefix}${escapeId(throttlerId)}/${key}`;
}

/** The throttler id (and key, for a key's record) a `bucket/…` Kafka key names; null for another key. */
export function parseBucketKey(stateKey: string): { readonly throttlerId: string; readonly key?: string } | null {
  if (!stateKey.startsWith(STATE_KEYS.bucketPrefix)) return null;
  const rest = stateKey.slice(STATE_KEYS.bucketPrefix.length);
  const slash = rest.indexOf("/");
  if (slash < 0) return { throttlerId: unescapeId(rest) };
  return { throttlerId: unescapeId(rest.slice(0, slash)), key: rest.slice(slash + 1) };
}

/** The Kafka key of a throttler's or a key's record. */
export function stateKeyOf(record: { readonly throttlerId: string; readonly key?: string | undefined }): string {
  return record.key === undefined ? bucketKey(record.throttlerId) : keyBucketKey(record.throttlerId, record.key);
}

export function encodeSpec(record: PersistedSpec): string {
  return JSON.stringify({
    version: record.version,
    dynamic_spec_json: record.dynamicSpecJson,
    generation: record.generation,
    written_at_ms: record.writtenAtMs,
  });
}

export function encodeLeader(record: LeaderRecord): string {
  return JSON.stringify({ address: record.address, member_id: record.memberId, generation: record.generation, since_ms: record.sinceMs });
}

export function encodeThrottler(record: PersistedThrottler): string {
  const leases = record.leases ? encodeLeases({ [record.throttlerId]: record.leases })?.[record.throttlerId] : undefined;
  const adaptive = record.adaptive ? encodeAdaptive({ [record.throttlerId]: record.adaptive })?.[record.throttlerId] : undefined;
  return JSON.stringify({
    throttler: record.throttlerId,
    ...(record.key !== undefined ? { key: record.key } : {}),
    ...(record.balance ? { balance: record.balance.balance, at_ms: record.balance.atMs } : {}),
    limit_per_s: record.limitPerSecond,
    ...(leases ? { leases } : {}),
    ...(adaptive ? { adaptive } : {}),
    generation: record.generation,
    written_at_ms: record.writtenAtMs,
  });
}

export type DecodedRecord =
  | { readonly kind: "spec"; readonly record: PersistedSpec }
  | { readonly kind: "leader"; readonly record: LeaderRecord }
  | { readonly kind: "throttler"; readonly record: PersistedThrottler }
  /** A tombstone of `bucket/…`: the record of that Kafka key (`stateKey`) is deleted. */
  | { readonly kind: "deleted"; readonly stateKey: string }
  /** The single `buckets` record written before §9.1: one record per throttler it names. */
  | { readonly kind: "legacy-buckets"; readonly records: readonly PersistedThrottler[] }
  | { readonly kind: "unknown"; readonly reason: string };

/** A record read back; anything malformed is reported, never thrown (a bad record must not stop a controller). */
export function decodeStateRecord(key: string | null, value: string | null): DecodedRecord {
  const name = JSON.stringify(key);
  if (value === null) {
    if (key?.startsWith(STATE_KEYS.bucketPrefix)) return { kind: "deleted", stateKey: key };
    return { kind: "unknown", reason: `key ${name} has no value` };
  }
  let o: unknown;
  try {
    o = JSON.parse(value);
  } catch {
    return { kind: "unknown", reason: `key ${name} is not JSON` };
  }
  if (!isObject(o)) return { kind: "unknown", reason: `key ${name} is not an object` };
  const generation = finite(o["generation"]) ? o["generation"] : 0;
  const writtenAtMs = finite(o["written_at_ms"]) ? o["written_at_ms"] : 0;
  if (key === STATE_KEYS.spec || key === STATE_KEYS.legacySpec) {
    const version = o["version"];
    const json = o["dynamic_spec_json"];
    if (!finite(version) || typeof json !== "string") return { kind: "unknown", reason: `${name} needs "version" and "dynamic_spec_json"` };
    return { kind: "spec", record: { version, dynamicSpecJson: json, generation, writtenAtMs } };
  }
  if (key === STATE_KEYS.leader) {
    const address = o["address"];
    if (typeof address !== "string") return { kind: "unknown", reason: `"leader" needs a string "address"` };
    const memberId = typeof o["member_id"] === "string" ? o["member_id"] : "";
    return { kind: "leader", record: { address, memberId, generation, sinceMs: finite(o["since_ms"]) ? o["since_ms"] : 0 } };
  }
  if (key?.startsWith(STATE_KEYS.bucketPrefix)) {
    const throttlerId = o["throttler"];
    if (typeof throttlerId !== "string") return { kind: "unknown", reason: `${name} needs a string "throttler"` };
    const keyOf = o["key"];
    if (keyOf !== undefined && typeof keyOf !== "string") return { kind: "unknown", reason: `${name} has a "key" that is not a string` };
    const record = decodeThrottler(throttlerId, o, generation, writtenAtMs);
    return { kind: "throttler", record: keyOf === undefined ? record : { ...record, key: keyOf } };
  }
  if (key === STATE_KEYS.legacyBuckets) return { kind: "legacy-buckets", records: decodeLegacyBuckets(o, generation, writtenAtMs) };
  return { kind: "unknown", reason: `unknown key ${name}` };
}

function decodeThrottler(throttlerId: string, o: Record<string, unknown>, generation: number, writtenAtMs: number): PersistedThrottler {
  const { balance, at_ms: atMs, limit_per_s: limit } = o;
  const leases = decodeLeases({ [throttlerId]: o["leases"] })?.[throttlerId];
  const adaptive = decodeAdaptive({ [throttlerId]: o["adaptive"] })?.[throttlerId];
  return {
    throttlerId,
    balance: finite(balance) && finite(atMs) ? { balance, atMs } : null,
    limitPerSecond: finite(limit) && limit >= 0 ? limit : null,
    ...(leases ? { leases } : {}),
    ...(adaptive ? { adaptive } : {}),
    generation,
    writtenAtMs,
  };
}

function decodeLegacyBuckets(o: Record<string, unknown>, generation: number, writtenAtMs: number): PersistedThrottler[] {
  const balances = isObject(o["buckets"]) ? o["buckets"] : {};
  const leases = decodeLeases(o["leases"]) ?? {};
  const adaptive = decodeAdaptive(o["adaptive"]) ?? {};
  const ids = new Set([...Object.keys(balances), ...Object.keys(leases), ...Object.keys(adaptive)]);
  return [...ids].map((throttlerId) => {
    const entry = isObject(balances[throttlerId]) ? balances[throttlerId] : {};
    const { balance, at_ms: atMs } = entry;
    const held = Object.hasOwn(leases, throttlerId) ? leases[throttlerId] : undefined;
    const loop = Object.hasOwn(adaptive, throttlerId) ? adaptive[throttlerId] : undefined;
    return {
      throttlerId,
      balance: finite(balance) && finite(atMs) ? { balance, atMs } : null,
      // Not persisted before §9.1: the bucket accrues at its own rate.
      limitPerSecond: null,
      ...(held ? { leases: held } : {}),
      ...(loop ? { adaptive: loop } : {}),
      generation,
      writtenAtMs,
    };
  });
}
