// loads TypeScript at run time: the generator module it runs is a .ts fixture, imported by path
import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { fileURLToPath } from "node:url";
import { systemClock } from "@sluice/core";
import { pipelineSpecSchema } from "@sluice/spec";
import { runGenerators, type Sink, type SinkRecord } from "../src/index.ts";

const fixtures = fileURLToPath(new URL("./fixtures/", import.meta.url));

describe("a stream generator exported as an rxjs Observable", () => {
  it("writes the first `messages` values as they come, then stops (the source is unsubscribed)", async () => {
    const pipeline = pipelineSpecSchema.parse({
      pipeline: "letters",
      streams: { letters: { topic: "letters", partitions: 3, generator: { module: "./letters-observable.ts", messages: 40 } } },
      computations: {},
    });
    const written: { stream: string; record: SinkRecord }[] = [];
    const sink: Sink = {
      async send(stream, records) {
        for (const record of records) written.push({ stream, record });
      },
      async close() {},
    };
    await runGenerators({ pipeline, specDir: fixtures, sink, clock: systemClock, signal: new AbortController().signal });
    assert.equal(written.length, 40);
    const ids = written.map(({ record }) => JSON.parse(new TextDecoder().decode(record.value ?? new Uint8Array())).id as string);
    assert.ok(ids.some((id) => id.startsWith("steady-")) && ids.some((id) => id.startsWith("burst-")), ids.join(", "));
    assert.equal(new Set(ids).size, 40, "each value once");
    assert.ok(written.every(({ stream }) => stream === "letters"));
  });
});
