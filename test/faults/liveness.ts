// Concurrency liveness over a recorded history (docs/design.md §11.2, §5.3): once a fault is over, a
// concurrency throttler whose callers are always waiting grants again. Units whose holder stopped
// renewing (a grant whose answer a failover lost, a caller that gave up) come back after at most
// two lease_timeouts of a serving leader: one while a client whose releases failed during the fault
// still renews (it does, with nothing held, for lease_timeout after its last failed release), one
// for its lease to run out. So from the recovery + 2 × lease_timeout + LIVENESS_MARGIN_MS on, a
// quiet stretch of LIVENESS_WINDOW_MS with callers waiting and not one grant is a violation.
import { iso, type Violation } from "./checker.ts";
import { sortByTime, type HistoryEvent, type ThrottlerInfo } from "./history.ts";

/** Margin on top of two lease_timeouts: the controller's sweep, a renewal's round trip, a loaded machine. */
export const LIVENESS_MARGIN_MS = 5_000;
/** How long callers may then wait with no grant at all: the load's deadline (10 s) and then some. */
export const LIVENESS_WINDOW_MS = 15_000;

type Event<T extends HistoryEvent["type"]> = Extract<HistoryEvent, { type: T }>;

/** When grants must flow again after fault `index`: its end or its recovery, whichever is later, plus two lease_timeouts and the margin. */
export function livenessFrom(fault: { endedAt: number; recoveredAt: number | null }, leaseTimeoutMs: number): number {
  return Math.max(fault.endedAt, fault.recoveredAt ?? fault.endedAt) + 2 * leaseTimeoutMs + LIVENESS_MARGIN_MS;
}

/** How long after the last fault a run must go on for its liveness to be checked. */
export function livenessTailMs(leaseTimeoutMs: number): number {
  return 2 * leaseTimeoutMs + LIVENESS_MARGIN_MS + LIVENESS_WINDOW_MS + 2_000;
}

/**
 * After each fault, in the stretch from `livenessFrom` to the next fault's start (or the run's end),
 * when it is at least LIVENESS_WINDOW_MS long and callers were waiting: the throttler granted within
 * LIVENESS_WINDOW_MS of its start. A throttler without a lease_timeout in its info is not checked.
 */
export function checkConcurrencyLiveness(unordered: readonly HistoryEvent[], info: ThrottlerInfo): Violation[] {
  if (info.kind !== "concurrency" || info.leaseTimeoutMs === undefined) return [];
  const events = sortByTime(unordered);
  const leaseTimeoutMs = info.leaseTimeoutMs;
  const faults = faultSpans(events);
  const calls = events.filter(
    (e): e is Event<"grant"> | Event<"fail"> | Event<"pending"> => (e.type === "grant" || e.type === "fail" || e.type === "pending") && e.throttler === info.id,
  );
  const grants = calls.filter((e): e is Event<"grant"> => e.type === "grant");
  const runEnd = calls.at(-1)?.at ?? 0;
  const violations: Violation[] = [];
  faults.forEach((fault, i) => {
    const from = livenessFrom(fault, leaseTimeoutMs);
    const to = Math.min(faults[i + 1]?.startedAt ?? Number.POSITIVE_INFINITY, runEnd);
    if (to - from < LIVENESS_WINDOW_MS) return;
    const windowEnd = from + LIVENESS_WINDOW_MS;
    // Callers waited in the window: a call of the throttler was outstanding at some point in it.
    const waited = calls.some((c) => c.startedAt < windowEnd && c.at > from);
    if (!waited || grants.some((g) => g.at >= from && g.at <= windowEnd)) return;
    const last = grants.filter((g) => g.at < from).at(-1);
    const next = grants.find((g) => g.at > windowEnd);
    violations.push({
      invariant: "concurrency-liveness",
      at: from,
      throttler: info.id,
      message:
        `throttler "${info.id}": no grant in the ${LIVENESS_WINDOW_MS} ms from ${iso(from)} though callers were waiting ` +
        `(fault #${fault.index + 1} ${fault.kind} over at ${iso(Math.max(fault.endedAt, fault.recoveredAt ?? fault.endedAt))}, ` +
        `+ 2 × lease_timeout ${leaseTimeoutMs} ms + ${LIVENESS_MARGIN_MS} ms); last grant before ${last ? iso(last.at) : "none"}, ` +
        `next ${next ? `${iso(next.at)} (${Math.round((next.at - from) / 100) / 10} s late)` : "none before the run ended"}: ` +
        "units stay held by holders that stopped renewing",
    });
  });
  return violations;
}

/** From the fault's recovery (or end) to the throttler's first grant after it; null when none came before the next fault. */
export function resumedAfterMs(
  events: readonly HistoryEvent[],
  throttler: string,
  fault: { endedAt: number; recoveredAt: number | null },
  until: number,
): number | null {
  const over = Math.max(fault.endedAt, fault.recoveredAt ?? fault.endedAt);
  const first = events.find((e) => e.type === "grant" && e.throttler === throttler && e.at >= over && e.at <= until);
  return first ? first.at - over : null;
}

interface FaultSpan {
  readonly index: number;
  readonly kind: string;
  readonly startedAt: number;
  readonly endedAt: number;
  readonly recoveredAt: number | null;
}

function faultSpans(events: readonly HistoryEvent[]): FaultSpan[] {
  const spans = new Map<number, FaultSpan>();
  for (const e of events) {
    if (e.type === "fault" && e.phase === "start") spans.set(e.index, { index: e.index, kind: e.kind, startedAt: e.at, endedAt: e.at, recoveredAt: null });
    const known = e.type === "fault" || e.type === "recovered" ? spans.get(e.index) : undefined;
    if (!known) continue;
    if (e.type === "fault" && e.phase === "end") spans.set(e.index, { ...known, endedAt: e.at });
    if (e.type === "recovered") spans.set(e.index, { ...known, recoveredAt: e.at });
  }
  return [...spans.values()].sort((a, b) => a.startedAt - b.startedAt);
}
