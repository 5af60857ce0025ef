import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { durationSchema, formatDuration, parseDuration } from "@sluice/spec";

describe("parseDuration", () => {
  it("reads a number with a unit as milliseconds", () => {
    assert.equal(parseDuration("500ms"), 500);
    assert.equal(parseDuration("1s"), 1_000);
    assert.equal(parseDuration("2m"), 120_000);
    assert.equal(parseDuration("1h"), 3_600_000);
    assert.equal(parseDuration("0s"), 0);
  });

  it("accepts decimals and keeps them exact", () => {
    assert.equal(parseDuration("1.5s"), 1_500);
    assert.equal(parseDuration("1.1s"), 1_100);
    assert.equal(parseDuration("0.25m"), 15_000);
    assert.equal(parseDuration("0.5ms"), 0.5);
  });

  it("takes non-negative integers as milliseconds", () => {
    assert.equal(parseDuration(0), 0);
    assert.equal(parseDuration(250), 250);
  });

  for (const bad of ["5 sec", "", "1d", "-1s", "1e3ms", " 1s", "1S", ".5s", "1.s", "ms"]) {
    it(`rejects ${JSON.stringify(bad)} with a message naming the accepted forms`, () => {
      assert.throws(
        () => parseDuration(bad),
        (error: unknown) => {
          assert.ok(error instanceof RangeError);
          assert.match(error.message, /"500ms"/);
          assert.ok(error.message.includes(`got ${JSON.stringify(bad)}`), error.message);
          return true;
        },
      );
    });
  }

  for (const bad of [-1, 1.5, Number.NaN, Number.POSITIVE_INFINITY]) {
    it(`rejects the number ${bad}`, () => {
      assert.throws(() => parseDuration(bad), RangeError);
    });
  }
});

describe("durationSchema", () => {
  it("parses both spellings to milliseconds", () => {
    assert.equal(durationSchema.parse("1.5s"), 1_500);
    assert.equal(durationSchema.parse(42), 42);
  });

  it("rejects other types and malformed strings", () => {
    for (const bad of [true, null, "fast", -3, 2.5, {}, []]) {
      assert.equal(durationSchema.safeParse(bad).success, false, `accepted ${JSON.stringify(bad)}`);
    }
  });
});

describe("formatDuration", () => {
  it("writes the shortest exact spelling", () => {
    assert.equal(formatDuration(0), "0ms");
    assert.equal(formatDuration(1), "1ms");
    assert.equal(formatDuration(500), "500ms");
    assert.equal(formatDuration(1_500), "1.5s");
    assert.equal(formatDuration(120_000), "2m");
    assert.equal(formatDuration(3_600_000), "1h");
  });
});
