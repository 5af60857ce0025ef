import type { Clock } from "@sluice/core";
import type { PipelineSpec } from "@sluice/spec";
import type { OutputMessage } from "./computation.ts";
import { encodeHeaders, encodeText, encodeValue } from "./io/stream-codec.ts";
import { importSpecModule } from "./load-module.ts";
import type { Sink, SinkRecord } from "./ports/sink.ts";

/** A stream generator's module: `export default (index) => ({ key, value })`. */
export type GenerateMessage = (index: number) => OutputMessage | Promise<OutputMessage>;

const CHUNK = 100;

/**
 * Fills every stream that has a `generator` (DESIGN §3: how embedded pipelines get input): calls the
 * module's function for indexes 0..messages-1 and sends the results, paced to `rate_per_second`
 * when set. Resolves when all are written, or when `signal` aborts.
 */
export async function runGenerators(options: {
  pipeline: PipelineSpec;
  specDir: string;
  sink: Sink;
  clock: Clock;
  signal: AbortSignal;
}): Promise<void> {
  const { pipeline, specDir, sink, clock, signal } = options;
  const runs = Object.entries(pipeline.streams).flatMap(([stream, spec]) => {
    const generator = spec.generator;
    if (!generator) return [];
    return [
      (async () => {
        const where = `streams.${stream}.generator.module`;
        const generate = (await importSpecModule(specDir, generator.module, where))["default"];
        if (typeof generate !== "function") throw new TypeError(`${where}: ${generator.module} must export a default function (index) => ({ key, value })`);
        const startedAt = clock.now();
        for (let index = 0; index < generator.messages && !signal.aborted; index += CHUNK) {
          const records: SinkRecord[] = [];
          for (let i = index; i < Math.min(generator.messages, index + CHUNK); i++) {
            const message = (await (generate as GenerateMessage)(i)) ?? { value: i };
            records.push({
              key: encodeText(message.key),
              value: encodeValue(spec.format, message.value, where),
              ...(message.headers ? { headers: encodeHeaders(message.headers) ?? {} } : {}),
              ...(message.partition !== undefined ? { partition: message.partition } : {}),
              timestampMs: message.timestampMs ?? clock.now(),
            });
          }
          await sink.send(stream, records);
          if (generator.rate_per_second !== undefined) {
            const dueAt = startedAt + ((index + records.length) * 1000) / generator.rate_per_second;
            if (dueAt > clock.now()) await clock.sleep(dueAt - clock.now(), signal).catch(() => undefined);
          }
        }
      })(),
    ];
  });
  await Promise.all(runs);
}
