import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { UnprocessedEventTimes } from "../src/job/unprocessed-event-times.ts";

describe("UnprocessedEventTimes (the lag timestamp, docs/design.md §12)", () => {
  it("is 0 when nothing was read, and for an empty span", () => {
    const times = new UnprocessedEventTimes();
    assert.equal(times.lagTimestamp(), 0);
    times.read("a", 0, []);
    assert.equal(times.lagTimestamp(), 0);
  });

  it("takes the oldest event time of a span, not its first record's (out-of-order events)", () => {
    const times = new UnprocessedEventTimes();
    const span = times.read("a", 0, [5_000, 3_000, 9_000, 4_000]);
    assert.equal(times.lagTimestamp(), 3_000);
    span.done();
    assert.equal(times.lagTimestamp(), 0, "processed: nothing outstanding");
  });

  it("reads a span from records (through their reader) as from their times, ignoring unusable times", () => {
    const times = new UnprocessedEventTimes();
    const reader = { timestampMs: (record: { readonly timestampMs: number }) => record.timestampMs };
    const span = times.readRecords("a", 1_000, [{ timestampMs: 5_000 }, { timestampMs: Number.NaN }, { timestampMs: 0 }, { timestampMs: 3_000 }], reader);
    assert.equal(times.lagTimestamp(), 4_000);
    span.done();
    assert.equal(times.lagTimestamp(), 0);
    times.readRecords("a", 0, [{ timestampMs: -1 }], reader);
    assert.equal(times.lagTimestamp(), 0, "no usable time: holds nothing back");
  });

  it("counts iterations still to come: the oldest outstanding one decides", () => {
    const times = new UnprocessedEventTimes();
    const first = times.read("a", 0, [2_000, 2_500]);
    const second = times.read("a", 0, [1_500, 3_000]); // later offsets, older event
    assert.equal(times.lagTimestamp(), 1_500);
    second.done();
    assert.equal(times.lagTimestamp(), 2_000);
    first.done();
    assert.equal(times.lagTimestamp(), 0);
  });

  it("counts what the source fetched ahead, asked live", () => {
    const times = new UnprocessedEventTimes();
    let ahead: number | undefined = 1_000;
    times.watchReadAhead("a", 0, () => ahead);
    const span = times.read("a", 0, [4_000]);
    assert.equal(times.lagTimestamp(), 1_000, "a fetched-ahead batch holds an older event");
    ahead = 6_000;
    assert.equal(times.lagTimestamp(), 4_000);
    ahead = undefined;
    span.done();
    assert.equal(times.lagTimestamp(), 0);
  });

  it("adds each input's stream_delay and takes the minimum over inputs", () => {
    const times = new UnprocessedEventTimes();
    times.read("fast", 60_000, [100_000]); // 160,000
    times.read("slow", 0, [150_000]); // 150,000
    assert.equal(times.lagTimestamp(), 150_000);
    times.read("fast", 60_000, [80_000]); // 140,000
    assert.equal(times.lagTimestamp(), 140_000);
  });

  it("an input with nothing outstanding, or forgotten, holds nothing back", () => {
    const times = new UnprocessedEventTimes();
    const a = times.read("a", 0, [1_000]);
    times.read("b", 0, [7_000]);
    times.watchReadAhead("c", 0, () => undefined);
    assert.equal(times.lagTimestamp(), 1_000);
    a.done();
    assert.equal(times.lagTimestamp(), 7_000);
    times.forget("b");
    assert.equal(times.lagTimestamp(), 0);
    a.done(); // twice is harmless
    assert.equal(times.lagTimestamp(), 0);
  });

  it("ignores records without a usable event time (0, negative, NaN)", () => {
    const times = new UnprocessedEventTimes();
    times.read("a", 10, [0, -5, Number.NaN, 2_000]);
    assert.equal(times.lagTimestamp(), 2_010);
    times.watchReadAhead("a", 10, () => 0);
    assert.equal(times.lagTimestamp(), 2_010);
  });
});
