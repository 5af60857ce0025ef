import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { ManualClock, SluiceError } from "@sluice/core";
import { AlignmentGroups } from "../src/quota/alignment/alignment-groups.ts";
import type { PartitionWatermarkReport, ReportWatermarksResult } from "@sluice/protocol";

const HOUR = 3_600_000;
const T0 = 1_700_000_000_000;

function p(partitionId: string, watermarkMs: number, extra: Partial<PartitionWatermarkReport> = {}): PartitionWatermarkReport {
  return { groupName: "g", partitionId, watermarkMs, idle: false, held: false, ...extra };
}

function bound(result: ReportWatermarksResult, id: string) {
  const b = result.bounds.find((x) => x.partitionId === id);
  assert.ok(b, `no bound for ${id}`);
  return b.unbounded ? "unbounded" : b.othersWatermarkMs;
}

describe("AlignmentGroups (controller, virtual time)", () => {
  it("answers each partition the minimum of the others, so the slowest one is never bounded by itself", () => {
    const groups = new AlignmentGroups({ clock: new ManualClock(T0) });
    const answer = groups.report({ clientId: "w1", partitions: [p("C/in/0", T0), p("C/in/1", T0 + HOUR), p("C/in/2", T0 + 2 * HOUR)] });
    assert.equal(bound(answer, "C/in/0"), T0 + HOUR, "the minimum's bound is the second smallest");
    assert.equal(bound(answer, "C/in/1"), T0);
    assert.equal(bound(answer, "C/in/2"), T0);
    assert.deepEqual(answer.groups, [{ groupName: "g", watermarkMs: T0, partitions: 3, held: 0, idle: 0 }]);
  });

  it("spans workers; a worker's report replaces its earlier one, so a revoked partition stops counting at once", () => {
    const groups = new AlignmentGroups({ clock: new ManualClock(T0) });
    groups.report({ clientId: "w1", partitions: [p("C/in/0", T0)] });
    assert.equal(bound(groups.report({ clientId: "w2", partitions: [p("C/in/1", T0 + HOUR)] }), "C/in/1"), T0);
    groups.report({ clientId: "w1", partitions: [] }); // C/in/0 revoked from w1
    assert.equal(
      bound(groups.report({ clientId: "w2", partitions: [p("C/in/1", T0 + HOUR)] }), "C/in/1"),
      "unbounded",
      "a group with no other live member holds nobody",
    );
  });

  it("a partition moved to another worker is not dropped by its old owner's later report", () => {
    const groups = new AlignmentGroups({ clock: new ManualClock(T0) });
    groups.report({ clientId: "w1", partitions: [p("C/in/0", T0), p("C/in/1", T0 + HOUR)] });
    groups.report({ clientId: "w2", partitions: [p("C/in/0", T0 + 60_000)] }); // new owner
    groups.report({ clientId: "w1", partitions: [p("C/in/1", T0 + HOUR)] }); // old owner no longer lists it
    const answer = groups.report({ clientId: "w1", partitions: [p("C/in/1", T0 + HOUR)] });
    assert.equal(bound(answer, "C/in/1"), T0 + 60_000);
  });

  it("idle partitions do not hold the group back; held ones always do, whatever the idle flag says", () => {
    const groups = new AlignmentGroups({ clock: new ManualClock(T0) });
    groups.report({ clientId: "w1", partitions: [p("C/in/0", T0, { idle: true }), p("C/in/2", T0 + 30 * 60_000, { held: true, idle: true })] });
    const answer = groups.report({ clientId: "w2", partitions: [p("C/in/1", T0 + HOUR)] });
    assert.equal(bound(answer, "C/in/1"), T0 + 30 * 60_000);
    assert.deepEqual(answer.groups, [{ groupName: "g", watermarkMs: T0 + 30 * 60_000, partitions: 3, held: 1, idle: 1 }]);
  });

  it("a live partition that has read nothing holds the others at 0 (until it reads or goes idle)", () => {
    const groups = new AlignmentGroups({ clock: new ManualClock(T0) });
    const answer = groups.report({ clientId: "w1", partitions: [p("C/in/0", 0), p("C/in/1", T0 + HOUR)] });
    assert.equal(bound(answer, "C/in/1"), 0);
    assert.equal(bound(answer, "C/in/0"), T0 + HOUR, "the unread partition itself is free");
    assert.deepEqual(groups.snapshot(), [{ group: "g", watermarkMs: null, partitions: 2, held: 0, idle: 0, unread: 1 }]);
  });

  it("forgets a partition nobody reported for the entry TTL (its worker died), and says settling until then", async () => {
    const clock = new ManualClock(T0);
    const groups = new AlignmentGroups({ clock, entryTtlMs: 10_000 });
    assert.equal(groups.report({ clientId: "w1", partitions: [p("C/in/0", T0)] }).settling, true);
    await clock.advance(9_000);
    assert.equal(bound(groups.report({ clientId: "w2", partitions: [p("C/in/1", T0 + HOUR)] }), "C/in/1"), T0);
    await clock.advance(1_000);
    const answer = groups.report({ clientId: "w2", partitions: [p("C/in/1", T0 + HOUR)] });
    assert.equal(bound(answer, "C/in/1"), "unbounded");
    assert.equal(answer.settling, false);
  });

  it("keeps groups apart and names itself per instance", () => {
    const clock = new ManualClock(T0);
    const a = new AlignmentGroups({ clock });
    const answer = a.report({ clientId: "w1", partitions: [p("C/in/0", T0), { ...p("D/in/0", T0 + HOUR), groupName: "other" }] });
    assert.equal(bound(answer, "D/in/0"), "unbounded");
    assert.notEqual(a.instance, new AlignmentGroups({ clock }).instance);
  });

  it("refuses malformed reports with INVALID_REQUEST naming the field and the figures", () => {
    const groups = new AlignmentGroups({ clock: new ManualClock(T0) });
    const refused = (call: Parameters<AlignmentGroups["report"]>[0], pattern: RegExp) =>
      assert.throws(
        () => groups.report(call),
        (error: unknown) => error instanceof SluiceError && error.code === "INVALID_REQUEST" && pattern.test(error.message),
      );
    refused({ clientId: "", partitions: [] }, /client_id is empty/);
    refused({ clientId: "w", partitions: [p("", 1)] }, /partitions\[0\]\.partition_id is empty/);
    refused({ clientId: "w", partitions: [{ ...p("x", 1), groupName: "" }] }, /partitions\[0\]\.group_name is empty/);
    refused({ clientId: "w", partitions: [p("x", -5)] }, /partitions\[0\]\.watermark_ms must be whole epoch milliseconds ≥ 0, got -5/);
    refused({ clientId: "w", partitions: [p("x", 1), p("x", 2)] }, /partitions\[1\]\.partition_id "x" is reported twice/);
  });
});
