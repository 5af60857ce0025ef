// How a kafkajs message becomes what the runtime reads: a SourceRecord (fields, one shared empty set
// of headers, the timestamp parsed from kafkajs's decimal string with the last conversion reused for an
// equal string), or the message itself through KAFKA_RECORD_READER in a KafkaSourceBatch.
import assert from "node:assert/strict";
import { describe, it } from "node:test";
import type { KafkaMessage } from "kafkajs";
import { NO_RECORD_HEADERS } from "@sluice/runtime";
import { KafkaSourceBatch, KAFKA_RECORD_READER, toSourceRecord } from "../src/kafka-record-reader.ts";

function message(offset: string, timestamp: string, headers: KafkaMessage["headers"] = {}): KafkaMessage {
  return {
    magicByte: 2,
    attributes: 0,
    timestamp,
    offset,
    key: null,
    value: Buffer.from("{}"),
    headers,
    isControlRecord: false,
    batchContext: {} as never,
  } as KafkaMessage;
}

describe("toSourceRecord and the Kafka record reader", () => {
  it("keeps key, value and offset, and parses each timestamp, repeated or not", () => {
    const stamps = ["1764601234567", "1764601234567", "1764601234568", "1764601234567", "-1", "0"];
    const records = stamps.map((t, i) => toSourceRecord(message(String(10 + i), t)));
    assert.deepEqual(
      records.map((r) => r.timestampMs),
      [1764601234567, 1764601234567, 1764601234568, 1764601234567, -1, 0],
    );
    assert.deepEqual(
      records.map((r) => r.offset),
      ["10", "11", "12", "13", "14", "15"],
    );
    assert.equal(records[0]?.key, null);
    assert.equal(Buffer.from(records[0]?.value ?? []).toString(), "{}");
  });

  it("gives records without headers one shared empty set, and converts the others", () => {
    const [a, b] = [toSourceRecord(message("1", "5")), toSourceRecord(message("2", "5"))];
    assert.equal(a.headers, b.headers, "shared");
    assert.equal(a.headers, NO_RECORD_HEADERS, "the runtime's own empty set, which the job skips");
    assert.deepEqual(Object.keys(a.headers), []);
    const withHeader = toSourceRecord(message("3", "5", { trace: "abc" }));
    assert.equal(Buffer.from(withHeader.headers["trace"] ?? []).toString(), "abc");
  });

  it("a KafkaSourceBatch hands kafkajs's messages over as they are and makes SourceRecords only when `records` is read", () => {
    const messages = [message("7", "1764601234569"), message("8", "1764601234567", { trace: "t" }), message("9", "1764601234568")];
    const batch = new KafkaSourceBatch("clicks", 3, messages);
    assert.equal(batch.native.items, messages, "the very array, no copy");
    assert.equal(batch.native.reader, KAFKA_RECORD_READER);
    assert.equal(batch.firstOffset, "7");
    assert.equal(batch.lastOffset, "9");
    assert.equal(batch.oldestEventTimeMs(), 1764601234567, "the minimum, not the first");
    const records = batch.records;
    assert.equal(batch.records, records, "made once");
    assert.deepEqual(
      records.map((r) => [r.offset, r.timestampMs]),
      [
        ["7", 1764601234569],
        ["8", 1764601234567],
        ["9", 1764601234568],
      ],
    );
    assert.equal(Buffer.from(records[1]?.headers["trace"] ?? []).toString(), "t");
    const reader = KAFKA_RECORD_READER;
    for (const [i, m] of messages.entries()) {
      assert.deepEqual(
        [reader.key(m), reader.offset(m), reader.timestampMs(m), reader.headers(m)],
        [records[i]?.key, records[i]?.offset, records[i]?.timestampMs, records[i]?.headers],
      );
      assert.equal(reader.value(m), m.value, "the bytes themselves");
    }
  });
});
