// The contended step of a refill (CONTENDED_STEP_FRACTION) is scaled by the client's class's share
// of the class weights: a light class's refills stay in proportion to its rate, clients of one class
// still get the same step.
import assert from "node:assert/strict";
import { test } from "node:test";
import { CONTENDED_STEP_FRACTION, PrefetchSizer } from "../src/prefetch-sizer.ts";

const sizing = { targetRps: 1, minPrefetchAmount: 1, maxPrefetchAmount: 900, windowMs: 10_000 };

/** One refill of 90 a second for 5 s, then the size of the next one sent for waiting callers. */
function contendedRefill(classWeightShare?: () => number): number {
  const sizer = new PrefetchSizer(classWeightShare ? { ...sizing, classWeightShare } : sizing);
  for (let t = 0; t < 5_000; t += 1_000) sizer.recordRefill(t, 90);
  sizer.update(5_000, true);
  return sizer.prefetchAmount;
}

test("the step is the whole quarter without classes and a ninth of it for a class of weight 1 in 5:3:1", () => {
  const matched = 90 * (5 / 5); // 5 refills of 90 over the 5 s the client has existed, at 1 RPC/s
  const full = contendedRefill();
  assert.equal(full, Math.round(matched + 900 * CONTENDED_STEP_FRACTION));
  const light = contendedRefill(() => 1 / 9);
  assert.equal(light, Math.round(matched + (900 * CONTENDED_STEP_FRACTION) / 9));
  assert.ok(light < full);
});

test("a share outside (0, 1] is ignored rather than trusted", () => {
  assert.equal(
    contendedRefill(() => 0),
    contendedRefill(),
  );
  assert.equal(
    contendedRefill(() => Number.NaN),
    contendedRefill(),
  );
});
