// An adaptive limit across a failover with the state handed over through the throttler's record's
// JSON (docs/design.md §11.3, §5.2), as a successor reads it from `<pipeline>.controller-state`: the
// controller package's stand-in group in virtual time, its store encoding every record with this
// package's encoder and decoding it back. No broker: the record is what is under test here;
// packages/kafka/test/controller-*.test.ts and test/e2e/controller-*.test.ts run the store on one.
import assert from "node:assert/strict";
import { describe, it } from "node:test";
import type { PersistedThrottler } from "@sluice/failover-ports";
import { LOSS_DECISIONS, LOSS_READINGS, lossRun } from "../../packages/controller/test/adaptive-loss-run.ts";
import { MemoryStore } from "../../packages/controller/test/failover-stand-ins.ts";
import { bucketKey, decodeStateRecord, encodeThrottler } from "../../packages/kafka/src/controller-state-records.ts";

/** A store whose records went through the JSON of the controller-state topic. */
function recordStore(): MemoryStore {
  return new MemoryStore((record: PersistedThrottler) => {
    const decoded = decodeStateRecord(bucketKey(record.throttlerId), encodeThrottler(record));
    assert.equal(decoded.kind, "throttler", "the leader's record reads back");
    return decoded.kind === "throttler" ? decoded.record : record;
  });
}

describe("adaptive limit across a failover through the controller-state record", () => {
  it("after a capacity-loss cut the successor holds as the old leader would have, at every failover point", async () => {
    const unbroken = await lossRun({ store: recordStore(), failoverAfter: null });
    assert.deepEqual(
      unbroken.steps.map((s) => `${s.action} ${s.limit}`),
      LOSS_DECISIONS,
      unbroken.steps.map((s) => s.reason).join("\n"),
    );
    for (let k = 1; k < LOSS_READINGS.length; k++) {
      const broken = await lossRun({ store: recordStore(), failoverAfter: k });
      assert.deepEqual(broken.steps, unbroken.steps, `failover after reading ${k}:\n${broken.lines.join("\n")}`);
    }
  });
});
