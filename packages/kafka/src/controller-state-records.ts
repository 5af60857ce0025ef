import type { LeaderRecord, PersistedBuckets, PersistedSpec } from "@sluice/controller";
import { decodeAdaptive, encodeAdaptive } from "./controller-state-adaptive.ts";
import { decodeLeases, encodeLeases } from "./controller-state-leases.ts";

// The records of `<pipeline>.controller-state` (DESIGN §7.4): one key per kind, JSON values in the
// spec's snake_case so an operator can read them with any console consumer. Compaction keeps the
// latest of each key.

export const STATE_KEYS = { spec: "dynamic_spec", buckets: "buckets", leader: "leader" } as const;

export function controllerStateTopic(pipeline: string): string {
  return `${pipeline}.controller-state`;
}

export function controllerGroupId(pipeline: string): string {
  return `${pipeline}.controller`;
}

export function encodeSpec(record: PersistedSpec): string {
  return JSON.stringify({
    version: record.version,
    dynamic_spec_json: record.dynamicSpecJson,
    generation: record.generation,
    written_at_ms: record.writtenAtMs,
  });
}

export function encodeBuckets(record: PersistedBuckets): string {
  const buckets: Record<string, { balance: number; at_ms: number }> = {};
  for (const [id, b] of Object.entries(record.buckets)) buckets[id] = { balance: b.balance, at_ms: b.atMs };
  const leases = record.leases ? encodeLeases(record.leases) : undefined;
  const adaptive = record.adaptive ? encodeAdaptive(record.adaptive) : undefined;
  return JSON.stringify({
    buckets,
    ...(leases ? { leases } : {}),
    ...(adaptive ? { adaptive } : {}),
    generation: record.generation,
    written_at_ms: record.writtenAtMs,
  });
}

export function encodeLeader(record: LeaderRecord): string {
  return JSON.stringify({ address: record.address, member_id: record.memberId, generation: record.generation, since_ms: record.sinceMs });
}

export type DecodedRecord =
  | { readonly kind: "spec"; readonly record: PersistedSpec }
  | { readonly kind: "buckets"; readonly record: PersistedBuckets }
  | { readonly kind: "leader"; readonly record: LeaderRecord }
  | { readonly kind: "unknown"; readonly reason: string };

/** A record read back; anything malformed is reported, never thrown (a bad record must not stop a controller). */
export function decodeStateRecord(key: string | null, value: string | null): DecodedRecord {
  if (value === null) return { kind: "unknown", reason: `key ${JSON.stringify(key)} has no value` };
  let parsed: unknown;
  try {
    parsed = JSON.parse(value);
  } catch {
    return { kind: "unknown", reason: `key ${JSON.stringify(key)} is not JSON` };
  }
  if (typeof parsed !== "object" || parsed === null) return { kind: "unknown", reason: `key ${JSON.stringify(key)} is not an object` };
  const o = parsed as Record<string, unknown>;
  const num = (v: unknown) => (typeof v === "number" && Number.isFinite(v) ? v : null);
  const generation = num(o["generation"]);
  if (generation === null) return { kind: "unknown", reason: `key ${JSON.stringify(key)} has no numeric "generation"` };
  switch (key) {
    case STATE_KEYS.spec: {
      const version = num(o["version"]);
      const json = o["dynamic_spec_json"];
      if (version === null || typeof json !== "string") return { kind: "unknown", reason: `"dynamic_spec" needs "version" and "dynamic_spec_json"` };
      return { kind: "spec", record: { version, dynamicSpecJson: json, generation, writtenAtMs: num(o["written_at_ms"]) ?? 0 } };
    }
    case STATE_KEYS.buckets: {
      const raw = o["buckets"];
      if (typeof raw !== "object" || raw === null) return { kind: "unknown", reason: `"buckets" needs an object "buckets"` };
      const buckets: Record<string, { balance: number; atMs: number }> = {};
      for (const [id, b] of Object.entries(raw as Record<string, unknown>)) {
        const entry = (typeof b === "object" && b !== null ? b : {}) as Record<string, unknown>;
        const balance = num(entry["balance"]);
        const atMs = num(entry["at_ms"]);
        if (balance !== null && atMs !== null) buckets[id] = { balance, atMs };
      }
      const leases = decodeLeases(o["leases"]);
      const adaptive = decodeAdaptive(o["adaptive"]);
      const record = { buckets, ...(leases ? { leases } : {}), ...(adaptive ? { adaptive } : {}), generation, writtenAtMs: num(o["written_at_ms"]) ?? 0 };
      return { kind: "buckets", record };
    }
    case STATE_KEYS.leader: {
      const address = o["address"];
      if (typeof address !== "string") return { kind: "unknown", reason: `"leader" needs a string "address"` };
      const memberId = typeof o["member_id"] === "string" ? o["member_id"] : "";
      return { kind: "leader", record: { address, memberId, generation, sinceMs: num(o["since_ms"]) ?? 0 } };
    }
    default:
      return { kind: "unknown", reason: `unknown key ${JSON.stringify(key)}` };
  }
}
