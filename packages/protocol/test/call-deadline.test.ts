import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { Metadata } from "@grpc/grpc-js";
import { CALLER_TIMEOUT_METADATA_KEY, DEADLINE_ANSWER_GRACE_MS, receivedCallerDeadline, sendCallerDeadline } from "../src/call-deadline.ts";

describe("call deadline on the wire", () => {
  it("the client sends its remaining time and gives the transport a deadline a grace later", () => {
    const metadata = new Metadata();
    const transport = sendCallerDeadline(metadata, 10_050.2, 10_000);
    assert.deepEqual(metadata.get(CALLER_TIMEOUT_METADATA_KEY), ["51"]);
    assert.equal(transport, 10_050.2 + DEADLINE_ANSWER_GRACE_MS);
    const late = new Metadata();
    sendCallerDeadline(late, 9_000, 10_000);
    assert.deepEqual(late.get(CALLER_TIMEOUT_METADATA_KEY), ["0"], "a deadline already past is sent as 0, not negative");
  });

  it("the server answers by the caller's deadline, never later than the transport's", () => {
    const withTimeout = (value: string) => {
      const metadata = new Metadata();
      metadata.set(CALLER_TIMEOUT_METADATA_KEY, value);
      return metadata;
    };
    assert.equal(receivedCallerDeadline(withTimeout("50"), 21_000, 20_000), 20_050);
    assert.equal(receivedCallerDeadline(withTimeout("5000"), 21_000, 20_000), 21_000, "the transport deadline still bounds it");
    assert.equal(receivedCallerDeadline(withTimeout("50"), null, 20_000), 20_050);
    assert.equal(receivedCallerDeadline(new Metadata(), 21_000, 20_000), 21_000, "no metadata: the transport deadline");
    assert.equal(receivedCallerDeadline(new Metadata(), null, 20_000), null);
    for (const garbage of ["-5", "1e3", "NaN", "Infinity", "", " 5", "5.5", "9".repeat(17), "99999999999999999"]) {
      assert.equal(receivedCallerDeadline(withTimeout(garbage), 21_000, 20_000), 21_000, `"${garbage}" is ignored`);
    }
  });
});
