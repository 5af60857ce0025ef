// How a kafkajs message becomes the runtime's SourceRecord: the fields, no headers shared, and the
// timestamp parsed from kafkajs's decimal string (the last conversion is reused for an equal string).
import assert from "node:assert/strict";
import { describe, it } from "node:test";
import type { KafkaMessage } from "kafkajs";
import { toSourceRecord } from "../src/kafka-record-reader.ts";

function message(offset: string, timestamp: string, headers: KafkaMessage["headers"] = {}): KafkaMessage {
  return { magicByte: 2, attributes: 0, timestamp, offset, key: null, value: Buffer.from("{}"), headers, isControlRecord: false, batchContext: {} as never } as KafkaMessage;
}

describe("toSourceRecord", () => {
  it("keeps key, value and offset, and parses each timestamp, repeated or not", () => {
    const stamps = ["1764601234567", "1764601234567", "1764601234568", "1764601234567", "-1", "0"];
    const records = stamps.map((t, i) => toSourceRecord(message(String(10 + i), t)));
    assert.deepEqual(
      records.map((r) => r.timestampMs),
      [1764601234567, 1764601234567, 1764601234568, 1764601234567, -1, 0],
    );
    assert.deepEqual(records.map((r) => r.offset), ["10", "11", "12", "13", "14", "15"]);
    assert.equal(records[0]?.key, null);
    assert.equal(Buffer.from(records[0]?.value ?? []).toString(), "{}");
  });

  it("gives records without headers one shared empty set, and converts the others", () => {
    const [a, b] = [toSourceRecord(message("1", "5")), toSourceRecord(message("2", "5"))];
    assert.equal(a.headers, b.headers, "shared");
    assert.deepEqual(Object.keys(a.headers), []);
    const withHeader = toSourceRecord(message("3", "5", { trace: "abc" }));
    assert.equal(Buffer.from(withHeader.headers["trace"] ?? []).toString(), "abc");
  });
});
