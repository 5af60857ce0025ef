// The fault harness's concurrency liveness check on hand-made histories: a throttler that grants
// again within its bound passes, one whose units stay held fails with the figures, and a stretch
// too short to judge (the next fault came) is not judged. Pure logic, no services.
import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { checkHistory } from "./checker.ts";
import type { HistoryEvent, ThrottlerInfo } from "./history.ts";
import { checkConcurrencyLiveness, LIVENESS_MARGIN_MS, LIVENESS_WINDOW_MS, livenessFrom, resumedAfterMs } from "./liveness.ts";

const T0 = 1_700_000_000_000;
const LEASE = 10_000;
const slots: ThrottlerInfo = { id: "slots", kind: "concurrency", limit: 4, periodMs: 1_000, smooth: false, requestPeriodMs: 200, leaseTimeoutMs: LEASE };

const fault = (index: number, startMs: number, endMs: number, recoveredMs: number): HistoryEvent[] => [
  { type: "fault", at: T0 + startMs, index, kind: "kill-leader", phase: "start", target: "127.0.0.1:1", detail: "SIGKILL" },
  { type: "fault", at: T0 + endMs, index, kind: "kill-leader", phase: "end", target: "127.0.0.1:1" },
  { type: "recovered", at: T0 + recoveredMs, index, kind: "kill-leader", leader: "127.0.0.1:2", failoverMs: recoveredMs - startMs },
];
const grant = (atMs: number): HistoryEvent => ({
  type: "grant",
  at: T0 + atMs,
  client: "c1",
  throttler: "slots",
  amount: 1,
  version: 1,
  startedAt: T0 + atMs - 5,
  deadlineAt: T0 + atMs + 10_000,
});
const release = (atMs: number): HistoryEvent => ({ type: "release", at: T0 + atMs, client: "c1", throttler: "slots", amount: 1 });
/** A caller that waits out its 10 s deadline again and again over [fromMs, toMs). */
const starved = (fromMs: number, toMs: number): HistoryEvent[] => {
  const out: HistoryEvent[] = [];
  for (let t = fromMs; t + 10_000 <= toMs; t += 10_000) {
    out.push({
      type: "fail",
      at: T0 + t + 10_000,
      client: "c1",
      throttler: "slots",
      amount: 1,
      code: "CANCELLED",
      startedAt: T0 + t,
      deadlineAt: T0 + t + 10_000,
    });
  }
  return out;
};
/** One grant and release a second over [fromMs, toMs). */
const flowing = (fromMs: number, toMs: number): HistoryEvent[] => {
  const out: HistoryEvent[] = [];
  for (let t = fromMs; t < toMs; t += 1_000) out.push(grant(t), release(t + 100));
  return out;
};
const setup: HistoryEvent = { type: "setup", at: T0, seed: 1, clients: 2, throttlers: [slots] };

describe("fault harness: concurrency liveness", () => {
  it("the bound: the fault's end or recovery (the later) + 2 × lease_timeout + the margin", () => {
    assert.equal(livenessFrom({ endedAt: 1_000, recoveredAt: 3_000 }, LEASE), 3_000 + 2 * LEASE + LIVENESS_MARGIN_MS);
    assert.equal(livenessFrom({ endedAt: 4_000, recoveredAt: null }, LEASE), 4_000 + 2 * LEASE + LIVENESS_MARGIN_MS);
  });

  it("a throttler that grants again after a fault passes, and the report's figure says when it resumed", () => {
    const events = [setup, ...flowing(0, 10_000), ...fault(0, 10_000, 12_000, 16_000), ...starved(10_000, 30_000), ...flowing(30_000, 90_000)];
    assert.deepEqual(checkConcurrencyLiveness(events, slots), []);
    assert.deepEqual(checkHistory(events).violations, []);
    assert.equal(resumedAfterMs(events, "slots", { endedAt: T0 + 12_000, recoveredAt: T0 + 16_000 }, T0 + 90_000), 14_000);
  });

  it("units that stay held after a fault while callers wait are a violation with the figures", () => {
    const events = [setup, ...flowing(0, 10_000), ...fault(0, 10_000, 12_000, 16_000), ...starved(10_000, 100_000), ...flowing(100_000, 110_000)];
    const violations = checkConcurrencyLiveness(events, slots);
    assert.equal(violations.length, 1);
    assert.equal(violations[0]?.invariant, "concurrency-liveness");
    assert.match(
      violations[0]?.message ?? "",
      new RegExp(
        `throttler "slots": no grant in the ${LIVENESS_WINDOW_MS} ms from .* though callers were waiting \\(fault #1 kill-leader over at .*lease_timeout 10000 ms.*next .* \\(\\d+(\\.\\d)? s late\\)`,
      ),
    );
    assert.equal(checkHistory(events).violations.filter((v) => v.invariant === "concurrency-liveness").length, 1, "checkHistory runs it");
  });

  it("a stretch shorter than the bound and the window (the next fault came) is not judged; nor is a throttler without a lease_timeout", () => {
    const events = [setup, ...fault(0, 10_000, 12_000, 16_000), ...fault(1, 40_000, 42_000, 46_000), ...starved(10_000, 60_000)];
    assert.equal(checkConcurrencyLiveness(events, slots).length, 0, "from 41 s to 40 s: nothing to judge after fault #1; the run ends before fault #2's");
    const { leaseTimeoutMs: _, ...unleased } = slots;
    assert.deepEqual(checkConcurrencyLiveness([...events, ...starved(60_000, 200_000)], unleased), []);
  });
});
