import type { PersistedLeases, PersistedRequestId } from "@sluice/failover-ports";
import { finite, isObject, positive } from "./controller-state-values.ts";

// The `leases` of the `buckets` record of `<pipeline>.controller-state` (docs/design.md §11.2, §5.2), in the
// spec's snake_case like the rest of the record:
//   "leases": { "<throttler>": { "holders": { "<client>": { "<class>": units } },
//               "request_ids": [{ "request_id", "client_id", "amount", "waited_ms", "expires_at_ms" }],
//               "silent_ms": { "<client>": ms } } }   (silent_ms only where a holder has been silent)

export function encodeLeases(leases: Readonly<Record<string, PersistedLeases>>): Record<string, unknown> | undefined {
  const out: Record<string, unknown> = {};
  for (const [id, state] of Object.entries(leases)) {
    out[id] = {
      holders: state.holders,
      request_ids: state.requestIds.map((r) => ({
        request_id: r.requestId,
        client_id: r.clientId,
        amount: r.amount,
        waited_ms: r.waitedMs,
        expires_at_ms: r.expiresAtMs,
      })),
      ...(state.silentMs && Object.keys(state.silentMs).length > 0 ? { silent_ms: state.silentMs } : {}),
    };
  }
  return Object.keys(out).length > 0 ? out : undefined;
}

/** What can be read of `leases`; anything malformed is left out (a bad record must not stop a controller). */
export function decodeLeases(raw: unknown): Record<string, PersistedLeases> | undefined {
  if (!isObject(raw)) return undefined;
  const out: Record<string, PersistedLeases> = {};
  for (const [id, value] of Object.entries(raw)) {
    if (!isObject(value)) continue;
    // Built with Object.fromEntries (own properties): a client or class id "__proto__" is kept like any other.
    const holderEntries: [string, Record<string, number>][] = [];
    for (const [clientId, byClass] of Object.entries(isObject(value["holders"]) ? value["holders"] : {})) {
      if (!isObject(byClass)) continue;
      const units = Object.entries(byClass).filter((entry): entry is [string, number] => positive(entry[1]));
      if (units.length > 0) holderEntries.push([clientId, Object.fromEntries(units)]);
    }
    const holders = Object.fromEntries(holderEntries);
    const requestIds: PersistedRequestId[] = [];
    for (const r of Array.isArray(value["request_ids"]) ? (value["request_ids"] as unknown[]) : []) {
      if (!isObject(r)) continue;
      const { request_id: requestId, client_id: clientId, amount, waited_ms: waitedMs, expires_at_ms: expiresAtMs } = r;
      if (typeof requestId !== "string" || typeof clientId !== "string" || !positive(amount) || !finite(waitedMs) || !finite(expiresAtMs)) continue;
      requestIds.push({ requestId, clientId, amount, waitedMs, expiresAtMs });
    }
    // A silence for a holder not listed, or not a finite number ≥ 0, is left out (that holder gets a full lease).
    const silences = Object.entries(isObject(value["silent_ms"]) ? value["silent_ms"] : {}).filter(
      (entry): entry is [string, number] => Object.hasOwn(holders, entry[0]) && finite(entry[1]) && entry[1] > 0,
    );
    out[id] = { holders, requestIds, ...(silences.length > 0 ? { silentMs: Object.fromEntries(silences) } : {}) };
  }
  return out;
}
