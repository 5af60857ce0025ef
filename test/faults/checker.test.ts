// The fault harness's checker on hand-made histories: each invariant catches what it must, and a
// clean history passes. Pure logic, no services.
import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { checkConcurrency, checkDeadlines, checkHistory, checkRate, checkVersions } from "./checker.ts";
import type { HistoryEvent, ThrottlerInfo } from "./history.ts";

const T0 = 1_700_000_000_000;
const rate: ThrottlerInfo = { id: "rate", kind: "rate", limit: 10, periodMs: 1_000, smooth: false, requestPeriodMs: 100 };
const slots: ThrottlerInfo = { id: "slots", kind: "concurrency", limit: 3, periodMs: 1_000, smooth: false, requestPeriodMs: 100 };
const adaptive: ThrottlerInfo = { id: "adaptive", kind: "rate", limit: null, periodMs: 1_000, smooth: false, requestPeriodMs: 100, maxLimit: 50 };

const setup = (throttlers: ThrottlerInfo[], clients = 2): HistoryEvent => ({ type: "setup", at: T0, seed: 1, clients, throttlers });
const grant = (at: number, throttler: string, amount = 1, client = "c1"): HistoryEvent => ({
  type: "grant",
  at: T0 + at,
  client,
  throttler,
  amount,
  version: 1,
  startedAt: T0 + at - 5,
  deadlineAt: T0 + at + 10_000,
});
const release = (at: number, throttler: string, amount = 1, client = "c1"): HistoryEvent => ({ type: "release", at: T0 + at, client, throttler, amount });
/** `perSecond` grants of 1 spread evenly over [fromMs, toMs). */
const steady = (throttler: string, perSecond: number, fromMs: number, toMs: number): HistoryEvent[] => {
  const out: HistoryEvent[] = [];
  for (let t = fromMs; t < toMs; t += 1000 / perSecond) out.push(grant(t, throttler));
  return out;
};

describe("fault harness checker", () => {
  it("rate: a steady stream at the limit passes; a bucket's burst on top of it passes once (a full bucket at the window's start)", () => {
    const events = [grant(0, "rate", 10), ...steady("rate", 10, 10, 5_000)];
    assert.deepEqual(checkRate(events, rate, 2), []);
  });

  it("rate: a second bucket with no restore logged is a violation, with the bound's terms in the message", () => {
    const events = [...steady("rate", 10, 0, 3_000), grant(2_000, "rate", 10), grant(2_001, "rate", 10)];
    const violations = checkRate(events, rate, 2);
    assert.equal(violations.length, 1);
    assert.equal(violations[0]?.invariant, "rate-window");
    assert.match(
      violations[0]?.message ?? "",
      /throttler "rate": 3\d units granted .* above the bound 24 = 20 \(limit × period \+ one bucket\) \+ 0 restore\(s\) × 10 \+ 4/,
    );
  });

  it("rate: the same burst right after a logged restore is allowed (one bucket per documented restore)", () => {
    const events: HistoryEvent[] = [
      ...steady("rate", 10, 0, 3_000),
      { type: "restore", at: T0 + 1_990, controller: "127.0.0.1:1", line: "leader of pipeline" },
      grant(2_000, "rate", 10),
      grant(2_001, "rate", 10),
    ];
    assert.deepEqual(checkRate(events, rate, 2), []);
  });

  it("rate, smooth: no bucket on top of limit × period", () => {
    const smooth = { ...rate, smooth: true };
    assert.deepEqual(checkRate(steady("rate", 10, 0, 5_000), smooth, 2), []);
    assert.equal(checkRate([...steady("rate", 10, 0, 5_000), grant(2_500, "rate", 6)], smooth, 2).length, 1);
  });

  it("rate, adaptive: the bound follows the limit read from the leader (a successor starting full at a higher limit is caught)", () => {
    const limits: HistoryEvent[] = [
      { type: "limit", at: T0, throttler: "adaptive", limit: 4 },
      { type: "limit", at: T0 + 4_000, throttler: "adaptive", limit: 4 },
    ];
    const ok = [...limits, ...steady("adaptive", 4, 0, 5_000)];
    assert.deepEqual(checkRate(ok, adaptive, 2), []);
    const restoredFull: HistoryEvent[] = [...ok, { type: "restore", at: T0 + 2_000, controller: "b", line: "taking over" }, grant(2_010, "adaptive", 40)];
    const violations = checkRate(restoredFull, adaptive, 2);
    assert.equal(violations.length, 1);
    assert.match(violations[0]?.message ?? "", /1 restore\(s\) × 4/);
  });

  it("concurrency: holders within the limit pass, releases before grants at one instant", () => {
    const events = [
      grant(0, "slots", 2, "a"),
      grant(1, "slots", 1, "b"),
      release(10, "slots", 1, "a"),
      grant(10, "slots", 1, "b"),
      release(20, "slots", 1, "a"),
    ];
    const { violations, maxHeld } = checkConcurrency(events, slots);
    assert.deepEqual(violations, []);
    assert.equal(maxHeld, 3);
  });

  it("concurrency: a fourth unit held at once is a violation naming the holders", () => {
    const events = [grant(0, "slots", 2, "a"), grant(1, "slots", 1, "b"), grant(5, "slots", 1, "b"), release(8, "slots", 1, "b")];
    const { violations, maxHeld } = checkConcurrency(events, slots);
    assert.equal(maxHeld, 4);
    assert.equal(violations.length, 1);
    assert.match(violations[0]?.message ?? "", /4 units held .*\(a 2, b 2\), above its limit 3/);
  });

  it("versions: a reconfiguration answered with a version not above the last one is a lost reconfiguration", () => {
    const events: HistoryEvent[] = [
      { type: "reconfigure", at: T0 + 100, sentAt: T0 + 90, version: 2 },
      { type: "reconfigure", at: T0 + 200, sentAt: T0 + 190, version: 3 },
      { type: "reconfigure", at: T0 + 900, sentAt: T0 + 890, version: 3 },
    ];
    const violations = checkVersions(events);
    assert.equal(violations.length, 1);
    assert.match(violations[0]?.message ?? "", /answered with version 3, not above the version 3 .*lost/);
  });

  it("versions: a leader serving a version below one acknowledged, or a client going back, is a violation; going forward is not", () => {
    const events: HistoryEvent[] = [
      { type: "spec", at: T0 + 50, source: "leader", who: "a", version: 1 },
      { type: "reconfigure", at: T0 + 100, sentAt: T0 + 90, version: 2 },
      { type: "spec", at: T0 + 150, source: "leader", who: "a", version: 2 },
      { type: "spec", at: T0 + 150, source: "client", who: "c1", version: 2 },
      { type: "spec", at: T0 + 400, source: "leader", who: "b", version: 1 },
      { type: "spec", at: T0 + 500, source: "client", who: "c1", version: 1 },
      { type: "spec", at: T0 + 600, source: "client", who: "c2", version: 1 },
    ];
    const violations = checkVersions(events);
    assert.equal(violations.length, 2);
    assert.match(violations[0]?.message ?? "", /serving leader b answered version 1 .*after version 2 had been acknowledged/);
    assert.match(violations[1]?.message ?? "", /client c1 went from dynamic_spec version 2 .* back to 1/);
  });

  it("deadlines: an answer in time passes; one past the grace, or none at all, is a violation", () => {
    const base = { client: "c1", throttler: "rate", amount: 1, startedAt: T0, deadlineAt: T0 + 5_000 };
    const events: HistoryEvent[] = [
      { type: "fail", at: T0 + 5_100, code: "CANCELLED", ...base },
      { type: "grant", at: T0 + 9_000, version: 1, ...base },
      { type: "pending", at: T0 + 60_000, ...base },
      { type: "pending", at: T0 + 4_000, ...base },
    ];
    const violations = checkDeadlines(events, { deadlineGraceMs: 2_000 });
    assert.equal(violations.length, 2);
    assert.match(violations[0]?.message ?? "", /was answered \(granted\) 4000 ms past it/);
    assert.match(violations[1]?.message ?? "", /still unanswered when its client stopped/);
  });

  it("a whole clean history passes; a history without its setup event is refused", () => {
    const events: HistoryEvent[] = [
      setup([rate, slots]),
      ...steady("rate", 10, 0, 3_000),
      grant(0, "slots", 3, "a"),
      release(500, "slots", 3, "a"),
      grant(501, "slots", 3, "b"),
      { type: "reconfigure", at: T0 + 100, sentAt: T0 + 90, version: 2 },
    ];
    const result = checkHistory(events);
    assert.deepEqual(result.violations, []);
    assert.equal(result.maxHeld["slots"], 3);
    assert.throws(() => checkHistory(events.slice(1)), /no setup event/);
  });
});
