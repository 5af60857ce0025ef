// The checker of the fault harness (docs/design.md §5.3): pure functions over a recorded history. Each
// invariant is checked on its own and reports every violation it finds with the figures, so a
// failed run says what broke, where and by how much.
import { sortByTime, type HistoryEvent, type ThrottlerInfo } from "./history.ts";
import { checkConcurrencyLiveness } from "./liveness.ts";

export type Invariant = "rate-window" | "concurrency-held" | "concurrency-liveness" | "spec-version" | "deadline";

export interface Violation {
  readonly invariant: Invariant;
  readonly at: number;
  readonly throttler?: string;
  readonly message: string;
}

export interface CheckOptions {
  /** How long after its deadline an answer may still arrive on a loaded machine (timer and event-loop lag). */
  readonly deadlineGraceMs: number;
}

export const DEFAULT_CHECK_OPTIONS: CheckOptions = { deadlineGraceMs: 2_000 };

type Event<T extends HistoryEvent["type"]> = Extract<HistoryEvent, { type: T }>;
const ofType = <T extends HistoryEvent["type"]>(events: readonly HistoryEvent[], type: T): Event<T>[] => events.filter((e): e is Event<T> => e.type === type);

/** The terms of one rate window's bound, so a report can say which one was exceeded. */
export interface RateWindow {
  readonly throttler: string;
  readonly start: number;
  readonly endMs: number;
  readonly granted: number;
  /** limit × period, plus the bucket it may hold at the window's start (none when smooth, §7.1). */
  readonly base: number;
  /** Takeovers logged in (start − period, end]: each may start one bucket early. */
  readonly restores: number;
  readonly bucket: number;
  /** Per client: one refill prefetched before the window, one granted by overdrawing (pay-after). */
  readonly slack: number;
  readonly allowed: number;
}

/** The adaptive limit in force over [from, to]: the highest read there or last read before; maxLimit if none. */
export function limitOver(info: ThrottlerInfo, limits: readonly Event<"limit">[], from: number, to: number): number {
  if (info.limit !== null) return info.limit;
  let before: number | undefined;
  let highest = 0;
  let seen = false;
  for (const e of limits) {
    if (e.throttler !== info.id) continue;
    if (e.at <= from) before = e.limit;
    else if (e.at <= to) {
      highest = Math.max(highest, e.limit);
      seen = true;
    }
  }
  if (before === undefined && !seen) return info.maxLimit ?? Number.POSITIVE_INFINITY;
  return Math.max(highest, before ?? 0);
}

/** Every window of `period` that starts at a grant, with its bound. Windows starting elsewhere hold no more. */
export function rateWindows(events: readonly HistoryEvent[], info: ThrottlerInfo, clients: number): RateWindow[] {
  const grants = ofType(events, "grant")
    .filter((g) => g.throttler === info.id)
    .sort((x, y) => x.at - y.at);
  const restores = ofType(events, "restore").map((r) => r.at);
  const limits = ofType(events, "limit");
  const windows: RateWindow[] = [];
  let end = 0;
  let sum = 0;
  for (let start = 0; start < grants.length; start++) {
    const from = grants[start]?.at ?? 0;
    const to = from + info.periodMs;
    // Closed window [from, to].
    while (end < grants.length && (grants[end]?.at ?? 0) <= to) sum += grants[end++]?.amount ?? 0;
    const limit = limitOver(info, limits, from - info.periodMs, to);
    const perPeriod = (limit * info.periodMs) / 1000;
    const bucket = perPeriod;
    const base = perPeriod + (info.smooth ? 0 : bucket);
    const restoreCount = restores.filter((t) => t > from - info.periodMs && t <= to).length;
    // Per client: one refill prefetched before the window and handed out inside it, and one that overdraws.
    const slack = clients * 2 * Math.ceil((limit * info.requestPeriodMs) / 1000);
    windows.push({
      throttler: info.id,
      start: from,
      endMs: to,
      granted: sum,
      base,
      restores: restoreCount,
      bucket,
      slack,
      allowed: base + restoreCount * bucket + slack,
    });
    sum -= grants[start]?.amount ?? 0;
  }
  return windows;
}

/** Rate: in every window of `period`, granted ≤ limit × period (+ a bucket unless smooth) + one bucket per restore + slack. */
export function checkRate(events: readonly HistoryEvent[], info: ThrottlerInfo, clients: number): Violation[] {
  const violations: Violation[] = [];
  let lastReportedEnd = Number.NEGATIVE_INFINITY;
  for (const w of rateWindows(events, info, clients)) {
    if (w.granted <= w.allowed + 1e-9) continue;
    // One violation per run of overlapping windows: the first names the episode.
    if (w.start <= lastReportedEnd) continue;
    lastReportedEnd = w.endMs;
    violations.push({
      invariant: "rate-window",
      at: w.start,
      throttler: info.id,
      message:
        `throttler "${info.id}": ${round(w.granted)} units granted in the ${info.periodMs} ms window from ${iso(w.start)}, ` +
        `above the bound ${round(w.allowed)} = ${round(w.base)} (limit × period${info.smooth ? "" : " + one bucket"}) + ` +
        `${w.restores} restore(s) × ${round(w.bucket)} + ${round(w.slack)} (two refills per client)`,
    });
  }
  return violations;
}

/** Concurrency: the units held (granted and not yet released) never exceed the limit. */
export function checkConcurrency(events: readonly HistoryEvent[], info: ThrottlerInfo): { violations: Violation[]; maxHeld: number } {
  const limit = info.limit ?? info.maxLimit ?? Number.POSITIVE_INFINITY;
  // At one instant a release happens before the grant it may have made possible.
  const steps = events
    .filter((e): e is Event<"grant"> | Event<"release"> => (e.type === "grant" || e.type === "release") && e.throttler === info.id)
    .map((e, i) => ({ e, i }))
    .sort((a, b) => a.e.at - b.e.at || (a.e.type === "release" ? 0 : 1) - (b.e.type === "release" ? 0 : 1) || a.i - b.i);
  const violations: Violation[] = [];
  const byClient = new Map<string, number>();
  let held = 0;
  let maxHeld = 0;
  let over = false;
  for (const { e } of steps) {
    const delta = e.type === "grant" ? e.amount : -e.amount;
    held += delta;
    byClient.set(e.client, (byClient.get(e.client) ?? 0) + delta);
    maxHeld = Math.max(maxHeld, held);
    if (held > limit + 1e-9 && !over) {
      const holders = [...byClient]
        .filter(([, n]) => n > 0)
        .map(([c, n]) => `${c} ${n}`)
        .join(", ");
      violations.push({
        invariant: "concurrency-held",
        at: e.at,
        throttler: info.id,
        message: `throttler "${info.id}": ${round(held)} units held at ${iso(e.at)} (${holders}), above its limit ${limit}`,
      });
    }
    over = held > limit + 1e-9;
  }
  return { violations, maxHeld };
}

/** The spec version in force never goes backwards: not between acknowledged reconfigurations, not as a leader serves it, not as a client holds it. */
export function checkVersions(events: readonly HistoryEvent[]): Violation[] {
  const violations: Violation[] = [];
  const acks = ofType(events, "reconfigure");
  for (let i = 1; i < acks.length; i++) {
    const prev = acks[i - 1];
    const ack = acks[i];
    if (prev && ack && ack.version <= prev.version) {
      violations.push({
        invariant: "spec-version",
        at: ack.at,
        message:
          `a reconfiguration at ${iso(ack.at)} was answered with version ${ack.version}, not above the version ${prev.version} ` +
          `answered at ${iso(prev.at)}: a reconfiguration was lost`,
      });
    }
  }
  const served = ofType(events, "spec").filter((s) => s.source === "leader");
  let highest: Event<"spec"> | undefined;
  // A leader polled twice a second repeats one regression many times: one violation per episode.
  const reported = new Set<string>();
  for (const s of served) {
    const acked = acks.filter((a) => a.at < s.at).reduce((m, a) => Math.max(m, a.version), 0);
    const episode = `${s.who} ${s.version} ${Math.max(acked, highest?.version ?? 0)}`;
    if (s.version < Math.max(acked, highest?.version ?? 0) && reported.has(episode)) continue;
    if (s.version < Math.max(acked, highest?.version ?? 0)) reported.add(episode);
    if (s.version < acked) {
      violations.push({
        invariant: "spec-version",
        at: s.at,
        message: `the serving leader ${s.who} answered version ${s.version} at ${iso(s.at)}, after version ${acked} had been acknowledged`,
      });
    } else if (highest && s.version < highest.version) {
      violations.push({
        invariant: "spec-version",
        at: s.at,
        message: `the serving leader ${s.who} answered version ${s.version} at ${iso(s.at)}, after ${highest.who} had served version ${highest.version} at ${iso(highest.at)}`,
      });
    }
    if (!highest || s.version > highest.version) highest = s;
  }
  const byClient = new Map<string, Event<"spec">>();
  for (const s of ofType(events, "spec").filter((e) => e.source === "client")) {
    const prev = byClient.get(s.who);
    if (prev && s.version < prev.version) {
      violations.push({
        invariant: "spec-version",
        at: s.at,
        message: `client ${s.who} went from dynamic_spec version ${prev.version} (${iso(prev.at)}) back to ${s.version} (${iso(s.at)})`,
      });
    }
    if (!prev || s.version >= prev.version) byClient.set(s.who, s);
  }
  return violations;
}

/** A caller never waits past its deadline without an answer (a grant or an error). */
export function checkDeadlines(events: readonly HistoryEvent[], options: CheckOptions = DEFAULT_CHECK_OPTIONS): Violation[] {
  const violations: Violation[] = [];
  for (const e of events) {
    if (e.type !== "grant" && e.type !== "fail" && e.type !== "pending") continue;
    const lateBy = e.at - e.deadlineAt;
    if (lateBy <= options.deadlineGraceMs) continue;
    const what =
      e.type === "pending" ? "was still unanswered when its client stopped" : e.type === "grant" ? "was answered (granted)" : `was answered (${e.code})`;
    violations.push({
      invariant: "deadline",
      at: e.deadlineAt,
      throttler: e.throttler,
      message:
        `client ${e.client}: throttle(${e.amount}) on "${e.throttler}" started ${iso(e.startedAt)} with deadline ${iso(e.deadlineAt)} ` +
        `${what} ${round(lateBy)} ms past it (grace ${options.deadlineGraceMs} ms)`,
    });
  }
  return violations;
}

export interface CheckResult {
  readonly violations: Violation[];
  readonly maxHeld: Record<string, number>;
  readonly grants: number;
  /** Grants per throttler: a throttler that stops granting after a fault shows here (liveness, not an invariant). */
  readonly grantsByThrottler: Record<string, number>;
  readonly releases: number;
  readonly failures: Record<string, number>;
}

/** Every invariant over one history; `setup` names the throttlers and the client count. */
export function checkHistory(unordered: readonly HistoryEvent[], options: CheckOptions = DEFAULT_CHECK_OPTIONS): CheckResult {
  const events = sortByTime(unordered);
  const setup = ofType(events, "setup")[0];
  if (!setup) throw new Error("the history has no setup event: the harness writes it first (which throttlers, how many clients)");
  const violations: Violation[] = [];
  const maxHeld: Record<string, number> = {};
  for (const info of setup.throttlers) {
    if (info.kind === "rate") violations.push(...checkRate(events, info, setup.clients));
    else {
      const result = checkConcurrency(events, info);
      violations.push(...result.violations, ...checkConcurrencyLiveness(events, info));
      maxHeld[info.id] = result.maxHeld;
    }
  }
  violations.push(...checkVersions(events), ...checkDeadlines(events, options));
  const failures: Record<string, number> = {};
  for (const f of ofType(events, "fail")) failures[f.code] = (failures[f.code] ?? 0) + 1;
  return {
    violations: violations.sort((a, b) => a.at - b.at),
    maxHeld,
    grants: ofType(events, "grant").length,
    grantsByThrottler: Object.fromEntries(setup.throttlers.map((t) => [t.id, ofType(events, "grant").filter((g) => g.throttler === t.id).length])),
    releases: ofType(events, "release").length,
    failures,
  };
}

export function iso(ms: number): string {
  return new Date(ms).toISOString().slice(11, 23);
}

function round(n: number): number {
  return Math.round(n * 100) / 100;
}
