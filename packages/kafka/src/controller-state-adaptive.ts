import type { AdaptiveLawState, PersistedAdaptive } from "@sluice/failover-ports";
import { atLeastZero, finite, isObject, positive, wholeAtLeastZero } from "./controller-state-values.ts";

// The `adaptive` of the `buckets` record of `<pipeline>.controller-state` (docs/design.md §11.3, §5.2): each
// adaptive loop's state, so a successor goes on from its predecessor's limit.
//   "adaptive": { "<throttler>": { "limit_in_force": 40, "suggested_limit": 40, "failures": 0,
//                 "raised_last": false, "cut_last": true, "in_band_after_raise": false,
//                 "near": "below", "edge": "low", "steady_last": true, "since_loss_cut": 0,
//                 "last_load": 0.97, "last_use": 38, "decided_at_ms": 1700000000000 } }
// Every field of the law's state (AdaptiveLawState) is here, so a successor's next decision is the
// one its predecessor would have made (e.g. it holds after a capacity-loss cut instead of cutting
// again). Optional fields are written only when set, and fields are only ever added: records
// without `adaptive`, or without the fields added later (steady_last, since_loss_cut, last_load),
// still read, the missing fields then absent.

/**
 * The JSON name of every field of the law's state, in the order they are written. Typed by the
 * state's keys, so a field added to AdaptiveLawState does not compile until it has a name here
 * (and is then written): a successor that misses a field the law reads decides differently.
 */
export const LAW_STATE_FIELDS = {
  limit: "suggested_limit",
  failures: "failures",
  raisedLast: "raised_last",
  cutLast: "cut_last",
  inBandAfterRaise: "in_band_after_raise",
  near: "near",
  edge: "edge",
  steadyLast: "steady_last",
  sinceLossCut: "since_loss_cut",
  lastLoad: "last_load",
  lastUse: "last_use",
} as const satisfies { readonly [K in keyof Required<AdaptiveLawState>]: string };

export function encodeAdaptive(states: Readonly<Record<string, PersistedAdaptive>>): Record<string, unknown> | undefined {
  const out: Record<string, unknown> = {};
  for (const [id, { limitInForce, law, decidedAtMs }] of Object.entries(states)) {
    const entry: Record<string, unknown> = { limit_in_force: limitInForce };
    for (const [field, name] of Object.entries(LAW_STATE_FIELDS)) {
      const value = law[field as keyof AdaptiveLawState];
      if (value !== undefined) entry[name] = value;
    }
    entry["decided_at_ms"] = decidedAtMs;
    out[id] = entry;
  }
  return Object.keys(out).length > 0 ? out : undefined;
}

/**
 * What can be read of `adaptive`; an entry whose limits, failures or raised_last are malformed is
 * left out (that loop starts at initial_limit), and a malformed optional field is read as absent.
 */
export function decodeAdaptive(raw: unknown): Record<string, PersistedAdaptive> | undefined {
  if (!isObject(raw)) return undefined;
  const out: Record<string, PersistedAdaptive> = {};
  for (const [id, v] of Object.entries(raw)) {
    if (!isObject(v)) continue;
    const f = LAW_STATE_FIELDS;
    const { limit_in_force: inForce, [f.limit]: limit, [f.failures]: failures, [f.raisedLast]: raisedLast } = v;
    if (!positive(inForce) || !positive(limit) || !finite(failures) || failures < 0 || typeof raisedLast !== "boolean") continue;
    const near = oneOf(v[f.near], ["above", "below"] as const);
    const edge = oneOf(v[f.edge], ["low", "high"] as const);
    const flag = (key: string) => (typeof v[key] === "boolean" ? (v[key] as boolean) : undefined);
    const cutLast = flag(f.cutLast);
    const inBandAfterRaise = flag(f.inBandAfterRaise);
    const steadyLast = flag(f.steadyLast);
    const sinceLossCut = wholeAtLeastZero(v[f.sinceLossCut]);
    const lastLoad = atLeastZero(v[f.lastLoad]);
    const lastUse = atLeastZero(v[f.lastUse]);
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
        ...(steadyLast !== undefined ? { steadyLast } : {}),
        ...(sinceLossCut !== undefined ? { sinceLossCut } : {}),
        ...(lastLoad !== undefined ? { lastLoad } : {}),
        ...(lastUse !== undefined ? { lastUse } : {}),
      },
      decidedAtMs: finite(v["decided_at_ms"]) ? v["decided_at_ms"] : null,
    };
  }
  return Object.keys(out).length > 0 ? out : undefined;
}

function oneOf<T extends string>(v: unknown, values: readonly T[]): T | undefined {
  return values.find((value) => value === v);
}
