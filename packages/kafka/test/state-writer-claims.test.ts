// services: kafka
// The controller's state writer (ControllerStateWriter) across a new claim while a write is stuck:
// what a leader sees when the broker restarts under a write and the controller takes over again.
// A write queued under the earlier claim must not run after the new one: the writer, broken by the
// stuck write's failure, used to claim the transactional id again for it, which fenced the new
// leadership's producer ("LOST THE LEADERSHIP" in one process, in the fault harness's restart-broker)
// or wrote the earlier leadership's record after the new one's. The stuck write's Produce is held
// back by the client's socket factory and then fails (its batch is over the topic's
// max.message.bytes), on the shared broker. About 10 s.
import assert from "node:assert/strict";
import { randomBytes } from "node:crypto";
import { connect } from "node:net";
import { it } from "node:test";
import { Kafka, logLevel, type ISocketFactory } from "kafkajs";
import { ControllerStateWriter } from "../src/controller-state-writer.ts";
import { uniqueName, useBroker, waitFor, withTimeout } from "./kafka-test-kit.ts";

const PRODUCE_API_KEY = 0;
const MAX_MESSAGE_BYTES = 2_000;

const broker = useBroker();

/** Holds back the next Produce request while `holding` until `release()` sends it. */
class HeldProduce {
  holding = false;
  private held: (() => void) | null = null;
  get isHolding(): boolean {
    return this.held !== null;
  }
  release(): void {
    this.held?.();
    this.held = null;
  }
  readonly factory: ISocketFactory = ({ host, port, onConnect }) => {
    const socket = connect({ host, port }, onConnect);
    const write = socket.write.bind(socket) as (chunk: Uint8Array | string, ...rest: unknown[]) => boolean;
    const intercepted = (chunk: Uint8Array | string, ...rest: unknown[]): boolean => {
      if (this.holding && typeof chunk !== "string" && chunk.length >= 6 && Buffer.from(chunk).readInt16BE(4) === PRODUCE_API_KEY) {
        this.holding = false;
        this.held = () => write(chunk, ...rest);
        return true;
      }
      return write(chunk, ...rest);
    };
    Object.assign(socket, { write: intercepted });
    return socket;
  };
}

it("a write queued under an earlier claim is refused, and the new claim's writes are not fenced by it", async () => {
  const topic = uniqueName("writer-claims");
  await withTimeout(
    broker.admin.createTopics({
      topics: [{ topic, numPartitions: 1, replicationFactor: 1, configEntries: [{ name: "max.message.bytes", value: String(MAX_MESSAGE_BYTES) }] }],
      waitForLeaders: true,
    }),
    20_000,
    () => `createTopics ${topic}`,
  );
  const held = new HeldProduce();
  const kafka = new Kafka({
    clientId: "sluice-writer-claims-test",
    brokers: broker.brokers.split(","),
    logLevel: logLevel.NOTHING,
    socketFactory: held.factory,
  });
  const writer = new ControllerStateWriter(kafka, `${topic}.writer`, topic);
  broker.cleanup.push(["writer", () => writer.close()]);
  await writer.claim();
  await writer.write([{ key: "a", value: "first leadership" }]);

  held.holding = true;
  // Random base64 stays over the bound after gzip: the broker refuses the batch (not retriable).
  const stuck = writer.write([{ key: "b", value: randomBytes(3 * MAX_MESSAGE_BYTES).toString("base64") }]);
  const queued = writer.write([{ key: "c", value: "first leadership, queued behind" }]);
  stuck.catch(() => {});
  queued.catch(() => {});
  await waitFor(
    () => held.isHolding,
    30_000,
    () => "the Produce of the stuck write",
  );
  // A new leadership claims the writer while that write is stuck; then the write fails.
  const claiming = writer.claim();
  held.release();
  await withTimeout(claiming, 60_000, () => "the new claim");
  await assert.rejects(stuck, "the stuck write failed");
  await assert.rejects(queued, /claimed again/, "the write queued under the earlier claim is refused, not written under a new claim");
  await writer.write([{ key: "d", value: "second leadership" }]);

  const reader = kafka.consumer({ groupId: uniqueName("writer-claims-reader"), readUncommitted: false });
  broker.cleanup.push(["reader", () => reader.disconnect()]);
  const keys: string[] = [];
  await reader.connect();
  await reader.subscribe({ topic, fromBeginning: true });
  await reader.run({ eachMessage: async ({ message }) => void keys.push(message.key?.toString() ?? "") });
  await waitFor(
    () => keys.includes("d"),
    30_000,
    () => `the second leadership's record, read: ${keys.join(",")}`,
  );
  assert.deepEqual(keys, ["a", "d"], "only what each leadership wrote under its own claim is committed");
});
