import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { type KafkaLogEntry, forwardingLogCreator } from "../src/kafka-client.ts";

// kafkajs's numeric log levels (its `logLevel` enum), spelled out: importing kafkajs's values would put
// this broker-free test in the Kafka lane.
const ERROR = 1;

const CONCURRENT =
  "Failed to send messages: The producer attempted to update a transaction while another concurrent operation on the same transaction was ongoing";

function forward(configured: "warn" | "debug", level: number, message: string): KafkaLogEntry[] {
  const seen: KafkaLogEntry[] = [];
  const entry = forwardingLogCreator((e) => seen.push(e), configured)(ERROR);
  entry({ namespace: "Producer", level, label: "ERROR", log: { message, timestamp: "t", logger: "kafkajs", retryCount: 0, retryTime: 300 } });
  return seen;
}

describe("kafkajs log forwarding", () => {
  it("keeps an error an operator must see as an error, with its fields", () => {
    const seen = forward("warn", ERROR, "Failed to send messages: Connection error: connect ECONNREFUSED 127.0.0.1:9092");
    assert.equal(seen.length, 1);
    assert.equal(seen[0]?.level, "error");
    assert.deepEqual(seen[0]?.fields, { retryCount: 0, retryTime: 300 });
  });

  it("drops CONCURRENT_TRANSACTIONS, which kafkajs retries as the broker expects, at the default level", () => {
    assert.deepEqual(forward("warn", ERROR, CONCURRENT), []);
  });

  it("shows CONCURRENT_TRANSACTIONS as debug when debug logging is on", () => {
    const seen = forward("debug", ERROR, CONCURRENT);
    assert.equal(seen.length, 1);
    assert.equal(seen[0]?.level, "debug");
  });
});
