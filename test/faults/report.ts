// What a fault-harness run prints: per fault, the failover time, the longest pause in grants and
// the over-grant against the bound; then the invariants' verdict.
import { iso, rateWindows, type CheckResult } from "./checker.ts";
import type { HistoryEvent } from "./history.ts";
import { resumedAfterMs } from "./liveness.ts";
import type { FaultOutcome } from "./nemesis.ts";

/** How long after a fault ends (or the group recovers) its over-grant and grant pause are still counted as its own. */
const AFTERMATH_MS = 15_000;

export interface FaultFigures {
  readonly outcome: FaultOutcome;
  /** Longest gap between two grants of any throttler from the fault's start to its aftermath. */
  readonly grantGapMs: number;
  /** Per rate throttler: the worst window near the fault, over the no-fault bound, and what restores and slack allow. */
  readonly overGrant: { throttler: string; granted: number; base: number; over: number; allowedOver: number; at: number }[];
  /** Per concurrency throttler: from the fault's end or recovery (the later) to its first grant; null = none before the next fault. */
  readonly resumed: { throttler: string; ms: number | null }[];
}

/** The faults as the nemesis recorded them (start, end, recovery), so a stored history can be reported again. */
export function outcomesFromHistory(events: readonly HistoryEvent[]): FaultOutcome[] {
  const outcomes = new Map<number, FaultOutcome>();
  for (const e of events) {
    if (e.type === "fault" && e.phase === "start") {
      outcomes.set(e.index, {
        index: e.index,
        kind: e.kind,
        startedAt: e.at,
        endedAt: e.at,
        target: e.target ?? "",
        detail: e.detail ?? "",
        failoverMs: null,
        newLeader: null,
      });
    }
    const known = e.type === "fault" || e.type === "recovered" ? outcomes.get(e.index) : undefined;
    if (!known) continue;
    if (e.type === "fault" && e.phase === "end") outcomes.set(e.index, { ...known, endedAt: e.at });
    if (e.type === "recovered") outcomes.set(e.index, { ...known, failoverMs: e.failoverMs, newLeader: e.leader });
  }
  return [...outcomes.values()].sort((a, b) => a.index - b.index);
}

export function faultFigures(events: readonly HistoryEvent[], outcomes: readonly FaultOutcome[]): FaultFigures[] {
  const setup = events.find((e): e is Extract<HistoryEvent, { type: "setup" }> => e.type === "setup");
  const runEnd = events.at(-1)?.at ?? 0;
  const grants = events.filter((e): e is Extract<HistoryEvent, { type: "grant" }> => e.type === "grant");
  return outcomes.map((outcome, i) => {
    const next = outcomes[i + 1]?.startedAt ?? Number.POSITIVE_INFINITY;
    // Up to the aftermath of the later of the fault's end and the recovery (the next fault, or the run's end, if none came).
    const recoveredAt = outcome.failoverMs === null ? Number.POSITIVE_INFINITY : outcome.startedAt + outcome.failoverMs;
    const until = Math.min(Math.max(outcome.endedAt, recoveredAt) + AFTERMATH_MS, next, runEnd);
    let gap = 0;
    let last = grants.filter((g) => g.at <= outcome.startedAt).at(-1)?.at ?? outcome.startedAt;
    for (const g of grants) {
      if (g.at <= outcome.startedAt || g.at > until) continue;
      gap = Math.max(gap, g.at - last);
      last = g.at;
    }
    // A pause that lasts to the end of the fault's aftermath (or of the run) counts up to there.
    gap = Math.max(gap, until - last);
    const overGrant = (setup?.throttlers ?? [])
      .filter((t) => t.kind === "rate")
      .map((info) => {
        const near = rateWindows(events, info, setup?.clients ?? 1).filter((w) => w.start >= outcome.startedAt - info.periodMs && w.start <= until);
        const worst = near.reduce<(typeof near)[number] | undefined>((m, w) => (!m || w.granted - w.base > m.granted - m.base ? w : m), undefined);
        return worst
          ? {
              throttler: info.id,
              granted: worst.granted,
              base: worst.base,
              over: Math.max(0, worst.granted - worst.base),
              allowedOver: worst.allowed - worst.base,
              at: worst.start,
            }
          : { throttler: info.id, granted: 0, base: 0, over: 0, allowedOver: 0, at: outcome.startedAt };
      });
    const over = { endedAt: outcome.endedAt, recoveredAt: outcome.failoverMs === null ? null : outcome.startedAt + outcome.failoverMs };
    const resumed = (setup?.throttlers ?? [])
      .filter((t) => t.kind === "concurrency")
      .map((info) => ({ throttler: info.id, ms: resumedAfterMs(events, info.id, over, Math.min(next, runEnd)) }));
    return { outcome, grantGapMs: gap, overGrant, resumed };
  });
}

export function printReport(seed: number, figures: readonly FaultFigures[], result: CheckResult, print: (line: string) => void): void {
  print("");
  print(`== faults (seed ${seed}) ==`);
  for (const f of figures) {
    const o = f.outcome;
    print(
      `#${o.index + 1} ${o.kind} on ${o.target} at ${iso(o.startedAt)} (${o.detail}): ` +
        `leader serving after ${o.failoverMs === null ? "NEVER" : `${o.failoverMs} ms`}${o.newLeader ? ` (${o.newLeader}${sameLeader(o) ? (o.kind === "kill-leader" ? ": no survivor took over, the replacement on its port did" : ": no successor, the faulted leader again") : ""})` : ""}, ` +
        `longest pause in grants ${f.grantGapMs} ms`,
    );
    for (const g of f.overGrant) {
      print(
        `    ${g.throttler}: worst ${round(g.granted)} units in a window from ${iso(g.at)}; no-fault bound ${round(g.base)}, ` +
          `over-grant ${round(g.over)} (allowed ${round(g.allowedOver)}: restores + two refills per client)${g.over > g.allowedOver + 1e-9 ? "  ← OVER" : ""}`,
      );
    }
    for (const r of f.resumed)
      print(`    ${r.throttler}: ${r.ms === null ? "no grant before the next fault" : `granting again ${r.ms} ms after the fault was over`}`);
  }
  print("");
  print("== summary ==");
  const byKind = new Map<string, FaultFigures[]>();
  for (const f of figures) byKind.set(f.outcome.kind, [...(byKind.get(f.outcome.kind) ?? []), f]);
  for (const [kind, list] of byKind) {
    const failovers = list.map((f) => f.outcome.failoverMs).filter((ms): ms is number => ms !== null);
    const worstOver = Math.max(0, ...list.flatMap((f) => f.overGrant.map((g) => g.over)));
    const resumed = list.flatMap((f) => f.resumed.map((r) => r.ms)).filter((ms): ms is number => ms !== null);
    print(
      `${kind}: ${list.length}×, failover ${failovers.length > 0 ? `${Math.min(...failovers)}–${Math.max(...failovers)} ms` : "never"}, ` +
        `longest grant pause ${Math.max(...list.map((f) => f.grantGapMs))} ms, worst over-grant ${round(worstOver)} units` +
        (resumed.length > 0 ? `, concurrency granting again ≤ ${Math.max(...resumed)} ms after` : ""),
    );
  }
  const failures =
    Object.entries(result.failures)
      .map(([code, n]) => `${code} ${n}`)
      .join(", ") || "none";
  print(
    `grants per throttler: ${Object.entries(result.grantsByThrottler)
      .map(([id, n]) => `${id} ${n}`)
      .join(", ")}`,
  );
  print(`${result.grants} grants, ${result.releases} releases, failed calls: ${failures}; most concurrency units held: ${JSON.stringify(result.maxHeld)}`);
  if (result.violations.length === 0) {
    print(
      "invariants: all hold (rate windows, concurrency held ≤ limit, concurrency grants again after each fault, spec version never backwards, deadlines answered)",
    );
    return;
  }
  const counts = new Map<string, number>();
  for (const v of result.violations) counts.set(v.invariant, (counts.get(v.invariant) ?? 0) + 1);
  print(`invariants: ${result.violations.length} VIOLATION(S): ${[...counts].map(([k, n]) => `${k} ${n}`).join(", ")}`);
  for (const v of result.violations.slice(0, 40)) print(`  [${v.invariant}] ${v.message}${faultNear(v.at, figures)}`);
  if (result.violations.length > 40) print(`  … and ${result.violations.length - 40} more (the history files have them all)`);
}

/** " (during/after fault #n kind)" for the fault a violation follows, so a report names seed and fault. */
export function faultNear(at: number, figures: readonly FaultFigures[]): string {
  const before = figures.filter((f) => f.outcome.startedAt <= at + 1_000).at(-1);
  if (!before) return " (before any fault)";
  const during = at <= before.outcome.endedAt;
  return ` (${during ? "during" : "after"} fault #${before.outcome.index + 1} ${before.outcome.kind}, ${Math.round((at - before.outcome.startedAt) / 100) / 10} s from its start)`;
}

/** A leader fault after which no other controller took over (a liveness figure, not a safety violation). */
function sameLeader(o: FaultOutcome): boolean {
  return (o.kind === "kill-leader" || o.kind === "pause-leader" || o.kind === "cut-connection") && o.newLeader === o.target && !o.detail.includes("(follower)");
}

function round(n: number): number {
  return Math.round(n * 10) / 10;
}
