import assert from "node:assert/strict";
import { QuotaBucket, quotaBucketConfig, type QuotaBucketConfig, type QuotaRequest, type Settlement } from "../src/index.ts";

/** Test helpers that drive a QuotaBucket in virtual time, exactly as its driver would. */

export function makeBucket(overrides: Partial<QuotaBucketConfig>, now = 0): QuotaBucket {
  return new QuotaBucket("api", quotaBucketConfig(overrides), now);
}

export function request(requestId: string, amount: number, fields: Partial<QuotaRequest> = {}): QuotaRequest {
  return { requestId, clientId: "test", amount, timestampMs: 0, classId: "", deadlineAt: null, ...fields };
}

export function granted(settlements: readonly Settlement[]): string[] {
  return settlements.filter((s) => s.kind === "granted").map((s) => s.requestId);
}

/** Polls at every wake-up the bucket asks for until `until` (ms); returns every settlement in order. */
export function runUntil(bucket: QuotaBucket, from: number, until: number): { settlements: Settlement[]; now: number } {
  const settlements: Settlement[] = [];
  let now = from;
  for (;;) {
    settlements.push(...bucket.poll(now));
    const next = bucket.nextWakeAt(now);
    if (next === null || next > until) return { settlements, now: until };
    assert.ok(next >= now, "wake-ups never go back in time");
    now = next;
  }
}

/** Request ids stay unique across runs on one bucket, or a retry would be answered from memory. */
let nextRequestSeq = 0;

export interface BacklogResult {
  /** Units granted per class. */
  readonly units: Map<string, number>;
  readonly grants: number;
  readonly now: number;
}

/**
 * Keeps every named class backlogged (`depth` requests of `amount` waiting at all times) and runs
 * until `grants` requests were granted or `untilMs` passed. Class "" sends classless requests.
 * Units granted before `measureFromMs` (the initial full bucket) are not counted.
 */
export function runBacklog(
  bucket: QuotaBucket,
  classes: readonly string[],
  options: { amount: number; grants?: number; untilMs?: number; from?: number; depth?: number; measureFromMs?: number },
): BacklogResult {
  const { amount, grants = Number.POSITIVE_INFINITY, untilMs = Number.POSITIVE_INFINITY, depth = 3 } = options;
  let now = options.from ?? 0;
  const waiting = new Map<string, number>(classes.map((c) => [c, 0]));
  const units = new Map<string, number>(classes.map((c) => [c, 0]));
  let total = 0;
  for (;;) {
    for (const classId of classes) {
      while ((waiting.get(classId) ?? 0) < depth) {
        bucket.submit(request(`${classId}|${nextRequestSeq++}`, amount, { classId }), now);
        waiting.set(classId, (waiting.get(classId) ?? 0) + 1);
      }
    }
    const settlements = bucket.poll(now);
    for (const settlement of settlements) {
      assert.equal(settlement.kind, "granted");
      const classId = settlement.requestId.split("|")[0] ?? "";
      waiting.set(classId, (waiting.get(classId) ?? 0) - 1);
      if (now >= (options.measureFromMs ?? 0)) units.set(classId, (units.get(classId) ?? 0) + settlement.amount);
      total += 1;
      if (total >= grants) return { units, grants: total, now };
    }
    // Something was granted: top the backlog up again before time moves on.
    if (settlements.length > 0) continue;
    const next = bucket.nextWakeAt(now);
    assert.ok(next !== null, "a backlogged limited bucket always has a next wake-up");
    if (next > untilMs) return { units, grants: total, now };
    now = next;
  }
}

export function shares(units: Map<string, number>): Map<string, number> {
  const total = [...units.values()].reduce((a, b) => a + b, 0);
  return new Map([...units].map(([k, v]) => [k, v / total]));
}

export function assertClose(actual: number, expected: number, relativeTolerance: number, what: string): void {
  const error = Math.abs(actual - expected) / Math.abs(expected);
  assert.ok(error <= relativeTolerance, `${what}: got ${actual}, expected ${expected} ± ${relativeTolerance * 100}% (off by ${(error * 100).toFixed(2)}%)`);
}
