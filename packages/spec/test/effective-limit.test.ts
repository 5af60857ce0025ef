import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { effectiveLimit, throttlerSpecSchema, type ThrottlerSpecInput } from "@sluice/spec";

const throttler = (input: ThrottlerSpecInput) => throttlerSpecSchema.parse(input);

describe("effectiveLimit", () => {
  it("is the limit, or null when unlimited", () => {
    assert.equal(effectiveLimit(throttler({ limit: 100 })), 100);
    assert.equal(effectiveLimit(throttler({ limit: 0 })), 0);
    assert.equal(effectiveLimit(throttler({})), null);
  });

  it("is the sum of the declared weights under use_class_weights_as_limit", () => {
    const spec = throttler({ use_class_weights_as_limit: true, classes: { a: { weight: 3 }, b: { weight: 2 }, c: {} } });
    assert.equal(effectiveLimit(spec), 6);
  });
});
