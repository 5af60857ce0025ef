import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { WAIT_BUCKETS_MS, type WaitHistogramView } from "@sluice/core";
import type { ControllerSnapshot, ControllerThrottlerSnapshot } from "@sluice/controller";
import { formatRate, formatTopFrame, kindLines, waitStats } from "../src/top-frame.ts";

// `sluice top`'s picture from made-up snapshots: what a person reads off each line.

function histogram(waitsMs: readonly number[]): WaitHistogramView {
  return {
    count: waitsMs.length,
    sumMs: waitsMs.reduce((a, b) => a + b, 0),
    maxMs: Math.max(0, ...waitsMs),
    buckets: WAIT_BUCKETS_MS.map((bound) => waitsMs.filter((w) => w <= bound).length),
  };
}

function throttler(fields: Partial<ControllerThrottlerSnapshot> & { id: string }): ControllerThrottlerSnapshot {
  return {
    limit: 300,
    periodMs: 1000,
    capacity: 300,
    balance: 0,
    useClassWeightsAsLimit: false,
    maxGrantAmount: null,
    maxQueueSize: 10_000,
    pendingRequests: 0,
    pendingAmount: 0,
    detachedRequests: 0,
    counters: {
      granted: 0,
      released: 0,
      refunded: 0,
      classlessRequests: 0,
      unknownClassRequests: 0,
      refusedQueueFull: 0,
      refusedInvalidAmount: 0,
      timedOut: 0,
      cancelled: 0,
      joined: 0,
      reattached: 0,
      replayed: 0,
    },
    waitTime: histogram([]),
    grantedRate: 0,
    classes: [],
    ...fields,
  };
}

function classOf(id: string, weight: number, grantedRate: number, pendingRequests: number) {
  return {
    id,
    weight,
    accepting: true,
    active: pendingRequests > 0,
    virtualTime: 0,
    pendingRequests,
    pendingAmount: pendingRequests * 10,
    granted: 0,
    refunded: 0,
    released: 0,
    waitTime: histogram([]),
    grantedRate,
  };
}

const snapshot: ControllerSnapshot = {
  version: 3,
  generatedAt: "2026-11-30T12:34:56.789Z",
  throttlers: [
    throttler({
      id: "api_quota",
      grantedRate: 299.6,
      pendingRequests: 5,
      pendingAmount: 86,
      waitTime: histogram([100, 200, 300, 400, 1200]),
      classes: [classOf("interactive", 3, 224.7, 2), classOf("batch", 1, 74.9, 3), classOf("default", 1, 0, 0)],
    }),
    throttler({ id: "bytes", limit: null, capacity: null, balance: null, grantedRate: 12_345, classes: [classOf("default", 1, 12_345, 0)] }),
  ],
};

describe("sluice top frame", () => {
  const lines = formatTopFrame({ address: "127.0.0.1:7070", snapshot, intervalMs: 1000, color: false, columns: 120 });
  const text = lines.join("\n");

  it("names the controller, the dynamic_spec version and the time", () => {
    assert.equal(lines[0], "sluice top · controller 127.0.0.1:7070 · dynamic_spec v3 · 12:34:56 UTC · every 1s");
  });

  it("shows limit, granted rate, use of the limit, queue and waits per throttler", () => {
    const api = lines.find((line) => line.startsWith("api_quota"));
    assert.ok(api, text);
    assert.deepEqual(
      api
        .trim()
        .split(/\s{2,}/)
        .slice(0, 6),
      ["api_quota", "300", "300", "100%", "5", "86"],
    );
    // Since start the p95 is not capped by `max`, which is the longest wait of the last minute only:
    // the 95th of 5 waits falls in (1 s, 2.5 s] → 1000 + 1500 × 0.75 = 2125 ms.
    assert.match(api, /440 ms\s+2\.1 s\s+1\.2 s$/, "avg 440 ms, p95 2.1 s (interpolated, since start), max 1.2 s (last minute)");
    const bytes = lines.find((line) => line.startsWith("bytes"));
    assert.ok(bytes);
    assert.match(bytes, /^bytes\s+∞\s+12\.3k\s+–/, "unlimited: no use of a limit");
  });

  it("shows each class's share of weight among classes with demand against the observed share", () => {
    const row = (id: string) => lines.find((line) => line.trimStart().startsWith(`${id} `)) ?? "";
    assert.match(row("interactive"), /\s3\s+█+┃?░*\s+75% → 75%\s+225\s+2$/);
    assert.match(row("batch"), /\s1\s+█+┃?░*\s+25% → 25%\s+74\.9\s+3$/);
    assert.match(row("default"), /idle\s+0\s+0$/, "an idle class shows no share by weight");
  });

  it("measures waits over the refresh interval when it has the frame before", () => {
    const [api, ...rest] = snapshot.throttlers;
    assert.ok(api);
    const later: ControllerSnapshot = { ...snapshot, throttlers: [{ ...api, waitTime: histogram([100, 200, 300, 400, 1200, 50, 50]) }, ...rest] };
    const next = formatTopFrame({ address: "a:1", snapshot: later, previous: snapshot, intervalMs: 1000, color: false, columns: 120 });
    assert.match(next.find((line) => line.startsWith("api_quota")) ?? "", /50 ms/);
    assert.match(next.join("\n"), /avg and p95 over the last 1s/);
  });

  it("keeps the last picture with the error when a refresh fails", () => {
    const failed = formatTopFrame({ address: "a:1", snapshot, intervalMs: 500, error: "the controller at a:1 is unreachable", color: false, columns: 80 });
    assert.equal(failed[1], "✗ the controller at a:1 is unreachable — showing the last snapshot, retrying every 500ms");
  });

  it("says so when no throttler is declared", () => {
    const empty = formatTopFrame({ address: "a:1", snapshot: { ...snapshot, throttlers: [] }, intervalMs: 1000, color: false, columns: 80 });
    assert.match(empty.join("\n"), /no throttlers declared/);
  });
});

describe("waitStats", () => {
  it("interpolates the p95 inside its bucket, as histogram_quantile does, and never above a max that covers the window", () => {
    const view = histogram(Array.from({ length: 100 }, (_, i) => (i < 90 ? 20 : 80)));
    const stats = waitStats(undefined, view);
    assert.ok(stats);
    assert.equal(stats.meanMs, 26);
    // 95th of 100 falls in (50, 100]: 90 below, 10 inside → 50 + 50 × 5/10 = 75.
    assert.equal(stats.p95Ms, 75);
    assert.equal(waitStats(view, view), null, "no waits in between");
    const slow = histogram([100, 200, 300, 400, 1200]);
    assert.equal(waitStats(undefined, slow, true)?.p95Ms, 1200, "capped at the recent max when it covers the window");
    assert.equal(waitStats(undefined, slow, false)?.p95Ms, 2125, "not capped when the max is more recent than the window");
  });

  it("formats rates the way the dashboard does", () => {
    assert.deepEqual([0, 5, 74.94, 300, 12_345, 2_500_000].map(formatRate), ["0", "5", "74.9", "300", "12.3k", "2.5M"]);
  });
});

describe("sluice top: concurrency and adaptive throttlers", () => {
  it("shows units in use, holders and expired leases, and the loop's load against its band and limits", () => {
    const t = throttler({
      id: "cluster_tasks",
      limit: 18,
      kind: "concurrency",
      inUse: 17,
      concurrency: { leaseTimeoutMs: 10_000, holders: 17, heldUnits: 17, expiredLeases: 2, expiredUnits: 3 },
      adaptive: {
        source: "Prometheus",
        intervalMs: 2_000,
        dryRun: true,
        targetLow: 0.9,
        targetHigh: 0.95,
        minLimit: 1,
        maxLimit: 200,
        limitInForce: 18,
        suggestedLimit: 27,
        load: 0.612,
        lastDecisionAt: 0,
        lastAction: "raise",
        lastReason: "load 0.612 below [0.9, 0.95]",
        consecutiveFailures: 0,
        counters: { readings: 5, failedReadings: 0, raises: 5, cuts: 0, fallbacks: 0 },
      },
    });
    const lines = kindLines(t, (text) => text);
    assert.deepEqual(lines, [
      "  in use 17 of 18 · 17 holders · 2 leases expired (3 units back) · lease_timeout 10s",
      "  adaptive: load 0.612 ▽ below [0.9, 0.95] · limit 18 in [1, 200] · DRY RUN, suggested 27 · last: raise",
    ]);
  });
});

describe("sluice top: keyed throttlers", () => {
  const keyed = {
    maxKeys: 100_000,
    idleTimeoutMs: 600_000,
    keys: 1_234,
    activeKeys: 12,
    refusedKeys: 3,
    forgottenKeys: 45,
    topKeys: [
      { key: "acme", waitedMs: 12_300, balance: -4, pendingRequests: 2 },
      { key: "globex", waitedMs: 800, balance: null, pendingRequests: 0 },
    ],
  };

  it("shows the keys live, refused and forgotten, and the top keys by wait as /metrics has them", () => {
    const lines = kindLines(throttler({ id: "per_customer", keyed }), (text) => text);
    assert.equal(lines[0], "  keys 1234 live of max 100000 (12 with a bucket, the rest parked) · 3 refused · 45 forgotten · idle_timeout 10m");
    assert.match(lines[1] ?? "", /^ {2}top keys by wait, last minute\s+waited\s+balance\s+waiting$/);
    assert.match(lines[2] ?? "", /^ {2}acme\s+12 s\s+-4\s+2$/);
    assert.match(lines[3] ?? "", /^ {2}globex\s+800 ms\s+–\s+0$/);
    const quiet = kindLines(throttler({ id: "per_customer", keyed: { ...keyed, topKeys: [] } }), (text) => text);
    assert.equal(quiet[1], "  top keys by wait, last minute: none waited");
  });

  it("shows the one key asked for with --throttler and --key", () => {
    const key = {
      key: "acme",
      state: "active" as const,
      override: true,
      limit: 100,
      periodMs: 1000,
      balance: -4,
      capacity: 100,
      pendingRequests: 2,
      inUse: null,
      waitedMs: 12_300,
      idleMs: 250,
    };
    const lines = kindLines(throttler({ id: "per_customer", keyed: { ...keyed, key } }), (text) => text);
    assert.equal(
      lines[1],
      '  key "acme": active (a bucket of its own) · limit 100 per 1s (override) · balance -4 of 100 · 2 waiting · waited 12 s over the last minute · last request 250 ms ago',
    );
  });
});
