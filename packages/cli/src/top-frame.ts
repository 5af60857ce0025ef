import { RECENT_MAX_WINDOW_MS, WAIT_BUCKETS_MS, type WaitHistogramView } from "@sluice/core";
import type { ControllerSnapshot, ControllerThrottlerSnapshot } from "@sluice/controller";
import { formatDuration } from "@sluice/spec";

type KeyedSnapshot = NonNullable<ControllerThrottlerSnapshot["keyed"]>;

// One picture of `sluice top`: the dashboard's numbers as text. Per throttler its limit, granted rate
// (the controller's 5 s window), how much of the limit that is, the queue, and the wait; per class
// the share of weight against the observed share of the granted rate. Pure: snapshot(s) in, lines out.

export interface TopFrameInput {
  readonly address: string;
  readonly snapshot: ControllerSnapshot;
  /** The frame before, for waits over the refresh interval; absent on the first frame and with --once. */
  readonly previous?: ControllerSnapshot;
  readonly intervalMs: number;
  /** Why the latest refresh failed; the frame then shows `snapshot` as the last one known. */
  readonly error?: string;
  /** ANSI bold/dim; off when stdout is not a terminal or NO_COLOR is set. */
  readonly color: boolean;
  /** Terminal width; the share bars shrink to fit. */
  readonly columns: number;
  /** More lines after the throttlers: the computations' epoch parts (`--metrics`, top-parts.ts). */
  readonly computationLines?: readonly string[];
}

const BAR_MIN = 10;
const BAR_MAX = 30;

/** docs/design.md §5.2: who leads, since when, the elections so far and the age of the persisted state. */
function failoverLine(snapshot: ControllerSnapshot, dim: (text: string) => string): string {
  const f = snapshot.failover;
  if (!f) return "";
  const generated = Date.parse(snapshot.generatedAt);
  const since = f.leaderSince ? ` since ${f.leaderSince.slice(11, 19)} UTC (${formatMs(Math.max(0, generated - Date.parse(f.leaderSince)))})` : "";
  const state = f.stateAgeMs === null ? "no state persisted yet" : `state persisted ${formatMs(f.stateAgeMs)} ago`;
  return (
    `leader ${f.leader ?? "unknown"}${since} · ${f.role} here · generation ${f.generation ?? "–"} · ` +
    `${f.elections} ${f.elections === 1 ? "election" : "elections"} seen` +
    dim(` · ${state}`)
  );
}

export function formatTopFrame(input: TopFrameInput): string[] {
  const { snapshot, previous } = input;
  const bold = (text: string) => (input.color ? `\x1b[1m${text}\x1b[22m` : text);
  const dim = (text: string) => (input.color ? `\x1b[2m${text}\x1b[22m` : text);
  const red = (text: string) => (input.color ? `\x1b[31m${text}\x1b[39m` : text);
  const time = snapshot.generatedAt.slice(11, 19);
  const lines: string[] = [
    `${bold("sluice top")} · controller ${input.address} · dynamic_spec v${snapshot.version} · ${time} UTC` +
      dim(input.error ? "" : ` · every ${formatDuration(input.intervalMs)}`),
  ];
  if (input.error) lines.push(red(`✗ ${input.error} — showing the last snapshot, retrying every ${formatDuration(input.intervalMs)}`));
  if (snapshot.failover) lines.push(failoverLine(snapshot, dim));
  lines.push("");
  if (snapshot.throttlers.length === 0) {
    lines.push("no throttlers declared (add one with `sluice reconfigure`)");
    lines.push(...(input.computationLines ?? []));
    return lines;
  }
  const header = [
    pad("THROTTLER", 22),
    lpad("LIMIT/s", 9),
    lpad("GRANTED/s", 11),
    lpad("USE", 6),
    lpad("QUEUE", 7),
    lpad("OWED", 9),
    lpad("WAIT avg", 11),
    lpad("p95", 9),
    lpad("max", 9),
  ];
  lines.push(dim(header.join("")));
  const barWidth = Math.max(BAR_MIN, Math.min(BAR_MAX, input.columns - 70));
  for (const throttler of snapshot.throttlers) {
    const before = previous?.throttlers.find((t) => t.id === throttler.id);
    // `maxMs` is the longest wait of the last minute: it bounds the p95 of a refresh interval, not the p95 since start.
    const wait = waitStats(before?.waitTime, throttler.waitTime, before !== undefined && input.intervalMs <= RECENT_MAX_WINDOW_MS);
    const use = throttler.limit ? throttler.grantedRate / throttler.limit : null;
    lines.push(
      [
        bold(pad(throttler.id, 22)),
        lpad(throttler.limit === null ? "∞" : formatRate(throttler.limit), 9),
        lpad(formatRate(throttler.grantedRate), 11),
        lpad(use === null ? "–" : `${Math.round(use * 100)}%`, 6),
        lpad(String(throttler.pendingRequests), 7),
        lpad(formatRate(throttler.pendingAmount), 9),
        lpad(wait ? formatMs(wait.meanMs) : "–", 11),
        lpad(wait ? formatMs(wait.p95Ms) : "–", 9),
        lpad(formatMs(throttler.waitTime.maxMs), 9),
      ].join(""),
    );
    lines.push(...kindLines(throttler, dim));
    lines.push(...classLines(throttler, barWidth, dim));
  }
  lines.push(...(input.computationLines ?? []));
  lines.push("");
  lines.push(
    dim("GRANTED/s: over the last 5 s · USE: granted / limit · QUEUE: requests waiting · OWED: units they still need"),
    dim(
      `WAIT: request to grant, avg and p95 ${previous ? `over the last ${formatDuration(input.intervalMs)}` : "since start"}, max over the last minute · ` +
        "┃ marks the share by weight",
    ),
  );
  return lines;
}

/** A concurrency throttler's holders and an adaptive loop's reading, band and limits (docs/design.md §11.2, §11.3). */
export function kindLines(throttler: ControllerThrottlerSnapshot, dim: (text: string) => string): string[] {
  const lines: string[] = [];
  const leases = throttler.concurrency;
  if (leases) {
    const limit = throttler.limit === null ? "∞" : formatRate(throttler.limit);
    lines.push(
      dim(
        `  in use ${formatRate(throttler.inUse ?? 0)} of ${limit} · ${leases.holders} ${leases.holders === 1 ? "holder" : "holders"} · ` +
          `${leases.expiredLeases} leases expired (${formatRate(leases.expiredUnits)} units back) · lease_timeout ${formatDuration(leases.leaseTimeoutMs)}`,
      ),
    );
  }
  if (throttler.keyed) lines.push(...keyedLines(throttler.keyed, dim));
  const adaptive = throttler.adaptive;
  if (adaptive) {
    const load = adaptive.load === null ? "no reading" : adaptive.load.toFixed(3);
    const where =
      adaptive.load === null ? "" : adaptive.load < adaptive.targetLow ? " ▽ below" : adaptive.load > adaptive.targetHigh ? " △ above" : " ✓ in band";
    const suggested = adaptive.dryRun ? ` · DRY RUN, suggested ${formatRate(adaptive.suggestedLimit)}` : "";
    const failures = adaptive.consecutiveFailures > 0 ? ` · ${adaptive.consecutiveFailures} failed readings in a row` : "";
    lines.push(
      dim(
        `  adaptive: load ${load}${where} [${adaptive.targetLow}, ${adaptive.targetHigh}] · limit ${formatRate(adaptive.limitInForce)} ` +
          `in [${formatRate(adaptive.minLimit)}, ${formatRate(adaptive.maxLimit)}]${suggested}${failures}` +
          (adaptive.lastAction ? ` · last: ${adaptive.lastAction}` : ""),
      ),
    );
  }
  return lines;
}

/**
 * A keyed throttler (docs/design.md §11.4): its keys live, refused and forgotten, and the same top keys by
 * wait over the last minute as /metrics (sluice_controller_throttler_top_key_wait_ms), most first.
 */
export function keyedLines(keyed: KeyedSnapshot, dim: (text: string) => string): string[] {
  const lines = [
    dim(
      `  keys ${keyed.keys} live of max ${keyed.maxKeys} (${keyed.activeKeys} with a bucket, the rest parked) · ${keyed.refusedKeys} refused · ` +
        `${keyed.forgottenKeys} forgotten · idle_timeout ${formatDuration(keyed.idleTimeoutMs)}`,
    ),
  ];
  if (keyed.key) lines.push(keyLine(keyed.key));
  if (keyed.topKeys.length === 0) {
    lines.push(dim("  top keys by wait, last minute: none waited"));
    return lines;
  }
  lines.push(dim(`  ${pad("top keys by wait, last minute", 34)}${lpad("waited", 10)}${lpad("balance", 10)}${lpad("waiting", 9)}`));
  for (const top of keyed.topKeys) {
    lines.push(
      `  ${pad(shorten(top.key, 32), 34)}${lpad(formatMs(top.waitedMs), 10)}${lpad(top.balance === null ? "–" : formatRate(top.balance), 10)}${lpad(String(top.pendingRequests), 9)}`,
    );
  }
  return lines;
}

/** The one key `sluice top --throttler <id> --key <key>` asked for. */
function keyLine(key: NonNullable<KeyedSnapshot["key"]>): string {
  const state =
    key.state === "active" ? "active (a bucket of its own)" : key.state === "parked" ? "idle (parked as its balance)" : "not remembered (starts full)";
  const limit = key.limit === null ? "unlimited" : `limit ${formatRate(key.limit)} per ${formatDuration(key.periodMs)}${key.override ? " (override)" : ""}`;
  const balance = key.balance === null ? "" : ` · balance ${formatRate(key.balance)}${key.capacity === null ? "" : ` of ${formatRate(key.capacity)}`}`;
  const held = key.inUse === null ? "" : ` · ${formatRate(key.inUse)} in use`;
  const idle = key.idleMs === null ? "" : ` · last request ${formatMs(key.idleMs)} ago`;
  return `  key ${JSON.stringify(key.key)}: ${state} · ${limit}${balance}${held} · ${key.pendingRequests} waiting · waited ${formatMs(key.waitedMs)} over the last minute${idle}`;
}

/** A key is up to 256 bytes: cut in the middle so both ends stay readable. */
function shorten(text: string, width: number): string {
  return text.length <= width ? text : `${text.slice(0, width - 9)}…${text.slice(-8)}`;
}

function classLines(throttler: ControllerThrottlerSnapshot, barWidth: number, dim: (text: string) => string): string[] {
  if (throttler.classes.length === 0) return [];
  const total = throttler.classes.reduce((sum, c) => sum + c.grantedRate, 0);
  // A weight is a share among classes that want quota (docs/design.md §9.2): an idle class's goes to the others.
  const busy = throttler.classes.filter((c) => c.grantedRate > 0 || c.pendingRequests > 0);
  const busyWeight = busy.reduce((sum, c) => sum + c.weight, 0);
  const lines = [
    dim(`  ${pad("class", 20)}${lpad("weight", 8)}  ${pad("share: weight → observed", barWidth + 16)}${lpad("granted/s", 10)}${lpad("waiting", 9)}`),
  ];
  for (const c of throttler.classes) {
    const isBusy = c.grantedRate > 0 || c.pendingRequests > 0;
    const target = isBusy && busyWeight > 0 ? c.weight / busyWeight : null;
    const observed = total > 0 ? c.grantedRate / total : null;
    const figures = target === null ? "idle" : `${pct(target)} → ${observed === null ? "–" : pct(observed)}`;
    const weight = throttler.useClassWeightsAsLimit ? `${formatRate(c.weight)}/s` : formatRate(c.weight);
    lines.push(
      `  ${pad(c.id + (c.accepting ? "" : " (draining)"), 20)}${lpad(weight, 8)}  ${bar(observed ?? 0, target, barWidth)} ${pad(figures, 15)}` +
        `${lpad(formatRate(c.grantedRate), 10)}${lpad(String(c.pendingRequests), 9)}`,
    );
  }
  return lines;
}

/** Observed share as a filled bar, with `┃` where the share by weight ends. */
function bar(observed: number, target: number | null, width: number): string {
  const filled = Math.round(Math.max(0, Math.min(1, observed)) * width);
  const cells: string[] = Array.from({ length: width }, (_, i) => (i < filled ? "█" : "░"));
  if (target !== null) {
    const mark = Math.min(width - 1, Math.max(0, Math.round(target * width) - 1));
    cells[mark] = "┃";
  }
  return cells.join("");
}

/**
 * Mean and p95 (interpolated inside the bucket, as Prometheus' histogram_quantile) of the waits
 * between two views. `withinRecentMax`: the views are at most RECENT_MAX_WINDOW_MS apart, so no wait
 * between them exceeds `after.maxMs` and the p95 is capped by it.
 */
export function waitStats(before: WaitHistogramView | undefined, after: WaitHistogramView, withinRecentMax = false): { meanMs: number; p95Ms: number } | null {
  const count = after.count - (before?.count ?? 0);
  if (count <= 0) return null;
  const meanMs = (after.sumMs - (before?.sumMs ?? 0)) / count;
  const rank = 0.95 * count;
  let below = 0;
  for (let i = 0; i < WAIT_BUCKETS_MS.length; i++) {
    const cumulative = (after.buckets[i] ?? 0) - (before?.buckets[i] ?? 0);
    if (cumulative >= rank) {
      const lower = i === 0 ? 0 : (WAIT_BUCKETS_MS[i - 1] ?? 0);
      const upper = WAIT_BUCKETS_MS[i] ?? lower;
      const inBucket = cumulative - below;
      // No wait exceeds the max seen, however wide the bucket it fell in.
      const p95Ms = inBucket > 0 ? lower + (upper - lower) * ((rank - below) / inBucket) : upper;
      return { meanMs, p95Ms: withinRecentMax ? Math.min(p95Ms, after.maxMs) : p95Ms };
    }
    below = cumulative;
  }
  // Beyond the last bound: the recent max when it covers the window, else at least that bound.
  return { meanMs, p95Ms: withinRecentMax ? after.maxMs : Math.max(after.maxMs, WAIT_BUCKETS_MS[WAIT_BUCKETS_MS.length - 1] ?? 0) };
}

export function formatRate(value: number): string {
  const a = Math.abs(value);
  if (a >= 1e6) return `${(value / 1e6).toFixed(1)}M`;
  if (a >= 1e4) return `${(value / 1e3).toFixed(1)}k`;
  if (a >= 100 || Number.isInteger(value)) return value.toFixed(0);
  return value.toFixed(1);
}

/** Milliseconds with a decimal below 10 ms (prefetching makes most waits short), seconds from 1 s. */
export function formatMs(ms: number): string {
  if (ms >= 1000) return `${(ms / 1000).toFixed(ms >= 10_000 ? 0 : 1)} s`;
  return `${ms.toFixed(ms >= 10 ? 0 : 1)} ms`;
}

function pct(share: number): string {
  return `${Math.round(share * 100)}%`;
}

function pad(text: string, width: number): string {
  return text.length >= width ? `${text.slice(0, width - 1)} ` : text.padEnd(width);
}

function lpad(text: string, width: number): string {
  return text.padStart(width);
}
