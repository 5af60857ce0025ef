import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { trace } from "@opentelemetry/api";
import { validatePipelineSpec, type PipelineSpec } from "@sluice/spec";
import { NO_RECORD_HEADERS, type BatchContext, type Message, type RecordReader, type Sink, type SourceRecord } from "../src/index.ts";
import type { Job } from "../src/job/job.ts";
import { testJob } from "./job-factory.ts";

// How a Job turns source records into the messages a computation sees: values by the stream's
// format (Buffers, as kafkajs hands them over, and plain Uint8Arrays, as the memory log does),
// headers, byte sizes, and the record named by offset when its value does not decode.

function pipeline(): PipelineSpec {
  const result = validatePipelineSpec({
    pipeline: "decodetest",
    streams: { input: { topic: "input", partitions: 1 } },
    computations: { Reader: { module: "./unused.ts", inputs: ["input"], max_rows_per_batch: 10 } },
  });
  if (!result.ok) throw new Error(JSON.stringify(result.issues));
  return result.value;
}

const sink: Sink = { send: async () => undefined, close: async () => undefined };
const context = (): BatchContext => ({ signal: new AbortController().signal, commit: async () => undefined, rewind: () => undefined });

function job(seen: Message[], errors: string[]): Job {
  const computation = { process: (batch: { messages: readonly Message[] }) => void seen.push(...batch.messages) };
  return testJob({ spec: pipeline(), computationName: "Reader", computation, sink, tracer: trace.getTracer("job-decode-test"), errors });
}

const record = (offset: number, value: Uint8Array | null, headers: Record<string, Uint8Array> = {}): SourceRecord => ({
  key: Buffer.from(`k${offset}`),
  value,
  headers,
  offset: String(offset),
  timestampMs: 1_000 + offset,
});

describe("Job decoding", () => {
  it("decodes Buffer and Uint8Array values, keys and headers, and sums byte sizes as docs/design.md §10 meters them", async () => {
    const seen: Message[] = [];
    const errors: string[] = [];
    const j = job(seen, errors);
    await j.handle(
      {
        stream: "input",
        partition: 0,
        records: [
          record(0, Buffer.from('{"id":0}')),
          record(1, new TextEncoder().encode('{"id":"é"}'), { trace: Buffer.from("abc") }),
          record(2, Buffer.from([0xef, 0xbb, 0xbf, ...Buffer.from('{"bom":true}')])),
          record(3, null),
        ],
      },
      context(),
    );
    await j.close();
    assert.deepEqual(errors, []);
    assert.deepEqual(
      seen.map((m) => [m.key, m.value, m.headers, m.offset, m.byteSize]),
      [
        ["k0", { id: 0 }, {}, "0", 2 + 8],
        ["k1", { id: "é" }, { trace: "abc" }, "1", 2 + 11 + 5 + 3],
        ["k2", { bom: true }, {}, "2", 2 + 15],
        ["k3", null, {}, "3", 2],
      ],
    );
  });

  it("names the record whose value is not JSON by stream, partition and offset, and processes nothing of its iteration", async () => {
    const seen: Message[] = [];
    const errors: string[] = [];
    const j = job(seen, errors);
    await j.handle({ stream: "input", partition: 0, records: [record(6, Buffer.from("{}")), record(7, Buffer.from("not json"))] }, context());
    await j.close();
    assert.equal(seen.length, 0);
    assert.equal(errors.length, 1);
    assert.match(errors[0] ?? "", /stream "input" partition 0 offset 7: the stream's format is "json" but the value is not JSON/);
  });

  it("reads a batch's native records through their reader, one Message each, and never its SourceRecords", async () => {
    // A source's own record form: here a tuple [offset, text, header value or null].
    type Raw = readonly [number, string, string | null];
    const reads: string[] = [];
    const reader: RecordReader<Raw> = {
      key: () => null,
      value: ([, text]) => Buffer.from(text),
      headers: ([, , header]) => (header === null ? NO_RECORD_HEADERS : { h: Buffer.from(header) }),
      offset: ([offset]) => {
        reads.push(`offset ${offset}`);
        return String(offset);
      },
      timestampMs: ([offset]) => 5_000 + offset,
    };
    const items: Raw[] = [
      [40, '{"a":1}', null],
      [41, '"x"', "yz"],
      [42, "[]", null],
    ];
    const seen: Message[] = [];
    const errors: string[] = [];
    const j = job(seen, errors);
    await j.handle(
      {
        stream: "input",
        partition: 0,
        get records(): readonly SourceRecord[] {
          throw new Error("the job read batch.records although the batch has native records");
        },
        native: { items, reader },
      },
      context(),
    );
    await j.close();
    assert.deepEqual(errors, []);
    assert.deepEqual(
      seen.map((m) => [m.key, m.value, m.headers, m.offset, m.timestampMs, m.byteSize]),
      [
        [null, { a: 1 }, {}, "40", 5_040, 7],
        [null, "x", { h: "yz" }, "41", 5_041, 3 + 1 + 2],
        [null, [], {}, "42", 5_042, 2],
      ],
    );
    assert.deepEqual(reads, ["offset 40", "offset 41", "offset 42"], "each record's fields read once");
  });
});
