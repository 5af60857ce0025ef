import type { PersistedAdaptive } from "@sluice/controller";
import { finite, isObject, positive } from "./controller-state-values.ts";

// The `adaptive` of the `buckets` record of `<pipeline>.controller-state` (DESIGN §7.3, §7.4): each
// adaptive loop's state, so a successor goes on from its predecessor's limit.
//   "adaptive": { "<throttler>": { "limit_in_force": 40, "suggested_limit": 40, "failures": 0,
//                 "raised_last": false, "cut_last": true, "in_band_after_raise": false,
//                 "near": "below", "edge": "low", "last_use": 38, "decided_at_ms": 1700000000000 } }
// Optional fields are written only when set. Records without `adaptive` (written before it existed) still read.

export function encodeAdaptive(states: Readonly<Record<string, PersistedAdaptive>>): Record<string, unknown> | undefined {
  const out: Record<string, unknown> = {};
  for (const [id, { limitInForce, law, decidedAtMs }] of Object.entries(states)) {
    out[id] = {
      limit_in_force: limitInForce,
      suggested_limit: law.limit,
      failures: law.failures,
      raised_last: law.raisedLast,
      ...(law.cutLast !== undefined ? { cut_last: law.cutLast } : {}),
      ...(law.inBandAfterRaise !== undefined ? { in_band_after_raise: law.inBandAfterRaise } : {}),
      ...(law.near !== undefined ? { near: law.near } : {}),
      ...(law.edge !== undefined ? { edge: law.edge } : {}),
      ...(law.lastUse !== undefined ? { last_use: law.lastUse } : {}),
      decided_at_ms: decidedAtMs,
    };
  }
  return Object.keys(out).length > 0 ? out : undefined;
}

/** What can be read of `adaptive`; a malformed entry is left out (that loop starts at initial_limit). */
export function decodeAdaptive(raw: unknown): Record<string, PersistedAdaptive> | undefined {
  if (!isObject(raw)) return undefined;
  const out: Record<string, PersistedAdaptive> = {};
  for (const [id, v] of Object.entries(raw)) {
    if (!isObject(v)) continue;
    const { limit_in_force: inForce, suggested_limit: limit, failures, raised_last: raisedLast } = v;
    if (!positive(inForce) || !positive(limit) || !finite(failures) || failures < 0 || typeof raisedLast !== "boolean") continue;
    const near = v["near"] === "above" || v["near"] === "below" ? v["near"] : undefined;
    const edge = v["edge"] === "low" || v["edge"] === "high" ? v["edge"] : undefined;
    const flag = (key: string) => (typeof v[key] === "boolean" ? (v[key] as boolean) : undefined);
    const cutLast = flag("cut_last");
    const inBandAfterRaise = flag("in_band_after_raise");
    const lastUse = finite(v["last_use"]) && v["last_use"] >= 0 ? v["last_use"] : undefined;
    out[id] = {
      limitInForce: inForce,
      law: {
        limit,
        failures: Math.floor(failures),
        raisedLast,
        ...(cutLast !== undefined ? { cutLast } : {}),
        ...(inBandAfterRaise !== undefined ? { inBandAfterRaise } : {}),
        ...(near ? { near } : {}),
        ...(edge ? { edge } : {}),
        ...(lastUse !== undefined ? { lastUse } : {}),
      },
      decidedAtMs: finite(v["decided_at_ms"]) ? v["decided_at_ms"] : null,
    };
  }
  return Object.keys(out).length > 0 ? out : undefined;
}
