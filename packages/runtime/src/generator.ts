import type { Clock } from "@sluice/core";
import { isObservable, take, type Observable } from "rxjs";
import type { PipelineSpec } from "@sluice/spec";
import type { OutputMessage } from "./computation.ts";
import { encodeHeaders, encodeText, encodeValue } from "./io/stream-codec.ts";
import { importSpecModule } from "./load-module.ts";
import type { Sink, SinkRecord } from "./ports/sink.ts";

/**
 * A stream generator's module: `export default (index) => ({ key, value })`, or an rxjs Observable
 * of messages (`export default interval(250).pipe(map(...))`), which times itself.
 */
export type GenerateMessage = (index: number) => OutputMessage | Promise<OutputMessage>;
export type MessageSource = GenerateMessage | Observable<OutputMessage>;

const CHUNK = 100;

/**
 * Fills every stream that has a `generator` (docs/design.md §8: how embedded pipelines get input): calls the
 * module's function for indexes 0..messages-1 and sends the results, paced to `rate_per_second`
 * when set. Resolves when all are written, or when `signal` aborts.
 */
export async function runGenerators(options: { pipeline: PipelineSpec; specDir: string; sink: Sink; clock: Clock; signal: AbortSignal }): Promise<void> {
  const { pipeline, specDir, sink, clock, signal } = options;
  const runs = Object.entries(pipeline.streams).flatMap(([stream, spec]) => {
    const generator = spec.generator;
    if (!generator) return [];
    return [
      (async () => {
        const where = `streams.${stream}.generator.module`;
        const generate = (await importSpecModule(specDir, generator.module, where))["default"];
        const toRecord = (message: OutputMessage | undefined, index: number): SinkRecord => {
          const m = message ?? { value: index };
          return {
            key: encodeText(m.key),
            value: encodeValue(spec.format, m.value, where),
            ...(m.headers ? { headers: encodeHeaders(m.headers) ?? {} } : {}),
            ...(m.partition !== undefined ? { partition: m.partition } : {}),
            timestampMs: m.timestampMs ?? clock.now(),
          };
        };
        if (isObservable(generate)) {
          await writeObservable(
            generate as Observable<OutputMessage>,
            generator.messages,
            (message, index) => sink.send(stream, [toRecord(message, index)]),
            signal,
          );
          return;
        }
        if (typeof generate !== "function") {
          throw new TypeError(`${where}: ${generator.module} must export a default function (index) => ({ key, value }) or an rxjs Observable of messages`);
        }
        const startedAt = clock.now();
        for (let index = 0; index < generator.messages && !signal.aborted; index += CHUNK) {
          const records: SinkRecord[] = [];
          for (let i = index; i < Math.min(generator.messages, index + CHUNK); i++) {
            records.push(toRecord(await (generate as GenerateMessage)(i), i));
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

/**
 * Writes an Observable's first `messages` values as they come, one after the other (a write that is
 * slow delays the next, in order). Resolves when it completes, reached the count, or `signal` aborts.
 */
function writeObservable(
  source: Observable<OutputMessage>,
  messages: number,
  write: (message: OutputMessage, index: number) => Promise<void>,
  signal: AbortSignal,
): Promise<void> {
  return new Promise<void>((resolve, reject) => {
    if (signal.aborted || messages === 0) {
      resolve();
      return;
    }
    let index = 0;
    let writing: Promise<void> = Promise.resolve();
    const onAbort = () => {
      subscription.unsubscribe();
      resolve();
    };
    const subscription = source.pipe(take(messages)).subscribe({
      next(message) {
        const at = index++;
        writing = writing.then(() => write(message, at));
        writing.catch((error: unknown) => {
          subscription.unsubscribe();
          reject(error);
        });
      },
      error: (error: unknown) => reject(error),
      complete() {
        signal.removeEventListener("abort", onAbort);
        writing.then(resolve, reject);
      },
    });
    signal.addEventListener("abort", onAbort, { once: true });
  });
}
