// services: kafka
// The pure parts of the adapter: header normalisation, Java-compatible key placement, the
// stream ↔ topic map and the errors a wrong spec gets, plus a source over a topic that is missing.
import assert from "node:assert/strict";
import { randomBytes } from "node:crypto";
import { after, before, describe, it } from "node:test";
import { Partitioners, type PartitionMetadata } from "kafkajs";
import { KafkaIoFactory, KafkaSource, StreamTopics, fromKafkaHeaders, isKafkaIoError, toKafkaHeaders } from "../src/index.ts";
import { brokerFromEnvOrStart, javaMurmur2, javaPartition, pipelineSpec, uniqueName, type KafkaHandle } from "./kafka-test-kit.ts";

const encoder = new TextEncoder();
const text = (bytes: Uint8Array | undefined) => (bytes === undefined ? undefined : new TextDecoder().decode(bytes));

describe("headers", () => {
  it("takes the first of repeated values, encodes strings as UTF-8 and drops absent values", () => {
    const headers = fromKafkaHeaders({
      a: Buffer.from("buffer"),
      b: "strîng",
      c: ["first", Buffer.from("second")],
      d: [Buffer.from("only")],
      e: undefined,
      f: [],
    });
    assert.deepEqual(Object.keys(headers), ["a", "b", "c", "d"]);
    assert.equal(text(headers["a"]), "buffer");
    assert.equal(text(headers["b"]), "strîng");
    assert.equal(text(headers["c"]), "first");
    assert.equal(text(headers["d"]), "only");
    assert.ok(Object.values(headers).every((v) => v instanceof Uint8Array));
    assert.deepEqual(fromKafkaHeaders(undefined), {});
  });

  it('keeps a header called "__proto__" as a header', () => {
    const headers = fromKafkaHeaders(JSON.parse('{"__proto__": "x"}') as Record<string, string>);
    assert.equal(Object.getPrototypeOf(headers), Object.prototype);
    assert.equal(text(Object.getOwnPropertyDescriptor(headers, "__proto__")?.value as Uint8Array), "x");
  });

  it("hands Uint8Arrays to kafkajs as Buffers over the same memory", () => {
    const backing = encoder.encode("..value..");
    const view = backing.subarray(2, 7);
    const converted = toKafkaHeaders({ h: view });
    assert.ok(Buffer.isBuffer(converted["h"]));
    assert.equal(converted["h"]?.toString(), "value");
    assert.equal(converted["h"]?.buffer, backing.buffer);
  });
});

describe("keyed placement", () => {
  it("javaMurmur2 matches Kafka's own test vectors (UtilsTest.testMurmur2)", () => {
    const vectors: [string, number][] = [
      ["21", -973932308],
      ["foobar", -790332482],
      ["a-little-bit-long-string", -985981536],
      ["a-little-bit-longer-string", -1486304829],
      ["lkjh234lh9fiuh90y23oiuhsafujhadof229phr9h19h89h8", -58897971],
      ["abc", 479470107],
    ];
    for (const [key, expected] of vectors) assert.equal(javaMurmur2(encoder.encode(key)), expected, key);
  });

  it("kafkajs's DefaultPartitioner (the sink's) puts keys where Java's does", () => {
    for (const partitions of [1, 3, 7, 64]) {
      const partition = Partitioners.DefaultPartitioner();
      const partitionMetadata: PartitionMetadata[] = Array.from({ length: partitions }, (_, id) => ({
        partitionErrorCode: 0,
        partitionId: id,
        leader: 1,
        replicas: [1],
        isr: [1],
      }));
      for (let i = 0; i < 500; i++) {
        const key = randomBytes(i % 40);
        assert.equal(partition({ topic: "t", partitionMetadata, message: { key, value: null } }), javaPartition(key, partitions));
      }
    }
  });
});

describe("spec errors", () => {
  const spec = pipelineSpec({
    pipeline: "p",
    brokers: "127.0.0.1:1",
    streams: { in: { topic: "t-in", partitions: 2 }, out: { topic: "t-out", partitions: 1 } },
    computations: { C: { inputs: ["in"], outputs: ["out"] } },
  });

  it("maps streams to topics and back", () => {
    const topics = StreamTopics.of(spec);
    assert.deepEqual(topics.stream("in", "test"), { stream: "in", topic: "t-in", partitions: 2 });
    assert.equal(topics.byTopicName("t-out")?.stream, "out");
    assert.deepEqual(StreamTopics.inputsOf(spec, "C"), [{ stream: "in", topic: "t-in", partitions: 2 }]);
  });

  it("refuses a pipeline without a kafka section", () => {
    const { kafka: _kafka, ...embedded } = spec;
    assert.throws(
      () => new KafkaIoFactory(embedded),
      (error: unknown) => isKafkaIoError(error, "KAFKA_SPEC_INVALID") && /pipeline "p" has no "kafka" section/.test(error.message),
    );
  });

  it("refuses an undeclared computation or input stream", async () => {
    const factory = new KafkaIoFactory(spec, { logLevel: "nothing" });
    assert.throws(
      () => new KafkaSource({ kafka: factory.kafka, pipeline: spec, computation: "Missing" }),
      (error: unknown) => isKafkaIoError(error, "KAFKA_SPEC_INVALID") && /pipeline "p" has no computation "Missing" \(computations: "C"\)/.test(error.message),
    );
    assert.throws(
      () => factory.createSource("D", { ...spec.computations["C"]!, inputs: ["nope"] }, spec),
      (error: unknown) =>
        isKafkaIoError(error, "KAFKA_SPEC_INVALID") &&
        /computations\.D\.inputs: stream "nope" is not declared in pipeline "p" \(streams: "in", "out"\)/.test(error.message),
    );
    await factory.close();
  });
});

describe("source start", () => {
  let handle: KafkaHandle;
  before(async () => {
    handle = await brokerFromEnvOrStart();
  });
  after(async () => {
    await handle.stop();
  });

  it("fails with the group and the topic named when the input topic does not exist, and leaves nothing running", { timeout: 30_000 }, async () => {
    const topic = uniqueName("sluice-missing");
    const spec = pipelineSpec({
      pipeline: uniqueName("missing"),
      brokers: handle.brokers,
      streams: { in: { topic, partitions: 1 } },
      computations: { C: { inputs: ["in"] } },
    });
    const factory = new KafkaIoFactory(spec, { logLevel: "nothing" });
    const source = factory.createSource("C", spec.computations["C"]!, spec);
    await assert.rejects(
      source.start(async () => {}),
      (error: unknown) => {
        assert.ok(isKafkaIoError(error, "SOURCE_START_FAILED"), String(error));
        assert.match(error.message, new RegExp(`group "${spec.pipeline}\\.C" could not start on topics "${topic}"`));
        return true;
      },
    );
    await source.close();
    await factory.close();
    assert.throws(
      () => factory.createSink(spec),
      (error: unknown) => isKafkaIoError(error, "CLOSED"),
    );
  });
});
