import type { Attributes } from "@opentelemetry/api";
import { SluiceError } from "@sluice/core";
import type { DynamicSpec } from "@sluice/spec";
import type { Batch, RuntimeContext } from "../computation.ts";
import { nativeRecordsOf } from "../io/source-record-reader.ts";
import type { Sink } from "../ports/sink.ts";
import type { BatchContext, RecordReader, SourceBatch } from "../ports/source.ts";
import type { RetiredThrottlerTotals } from "./retired-throttler-totals.ts";
import { throttlerMetricsView, type ThrottlerMetricsView } from "./throttler-metrics-view.ts";
import { failSpan } from "./fail-span.ts";
import { IterationDecoder } from "./iteration-decoder.ts";
import { commitInBackground, partInSpan, processInSpan } from "./iteration-steps.ts";
import { BatchWaits, InputThrottle } from "./input-throttle.ts";
import type { JobOptions } from "./job-options.ts";
import { JobOutputs } from "./job-outputs.ts";
import { SharedLinks } from "./shared-links.ts";
import { UnprocessedEventTimes, type UnprocessedSpan } from "./unprocessed-event-times.ts";

export type { JobOptions } from "./job-options.ts";

/**
 * One computation bound to one input partition: splits delivered records into Process iterations of
 * at most `max_rows_per_batch`, and runs each as (docs/design.md §3): lag timestamp → Input.Throttle
 * (rows and bytes quota at once) → Process → Output (acknowledged) → Commit. Offsets are committed
 * only after outputs were acknowledged, so nothing is lost; a failure rewinds to the last commit.
 */
export class Job {
  readonly id: string;
  private readonly stop = new AbortController();
  private readonly context: RuntimeContext;
  private readonly outputs: JobOutputs;
  private readonly eventTimes: UnprocessedEventTimes;
  private readonly inputThrottle: InputThrottle;
  /** The batches' signals (source's and job's), and the give-up signals of Input.Throttle: see SharedLinks. */
  private readonly batchLinks = new SharedLinks(this.stop.signal);
  private readonly giveUpLinks = new SharedLinks(this.stop.signal);
  private initialized: Promise<void> | null = null;
  private consecutiveFailures = 0;
  private closed = false;
  /** The iteration span's name, made once. */
  private readonly iterationSpanName: string;
  private readonly decoder: IterationDecoder;

  constructor(private readonly options: JobOptions) {
    this.id = `${options.workerId}/${options.computationName}/${options.partition}`;
    this.iterationSpanName = `${options.computationName} iteration`;
    this.decoder = new IterationDecoder(options.stream, options.partition, options.pipeline.streams[options.stream]?.format ?? "json");
    this.eventTimes = options.eventTimes ?? new UnprocessedEventTimes();
    this.inputThrottle = new InputThrottle(options);
    this.outputs = new JobOutputs(options.pipeline, options.computationName);
    this.context = {
      pipeline: options.pipeline.pipeline,
      computation: options.computationName,
      partition: options.partition,
      workerId: options.workerId,
      jobId: this.id,
      log: options.log,
      signal: this.stop.signal,
      getThrottlerOrThrow: (id) => options.throttlers.getThrottlerOrThrow(id),
      tryGetThrottler: (id) => options.throttlers.tryGetThrottler(id),
      emit: (stream, message) => this.outputs.emit(stream, message),
    };
  }

  /** The source's handler for this job's partition. Never throws: failures rewind and back off. */
  async handle(batch: SourceBatch, context: BatchContext): Promise<void> {
    const linked = this.batchLinks.enter(context.signal);
    const signal = linked.signal;
    const waits = new BatchWaits(signal, context.signal, this.giveUpLinks);
    const maxRows = this.options.pipeline.computations[this.options.computationName]?.max_rows_per_batch ?? 100;
    const { stream } = this.options;
    const streamDelayMs = this.options.pipeline.streams[stream]?.stream_delay ?? 0;
    const readAhead = context.readAheadOldestMs;
    this.eventTimes.watchReadAhead(stream, streamDelayMs, readAhead ? () => readAhead.call(context) : () => undefined);
    // Every iteration of the batch is outstanding from now on, each as its own span: an iteration
    // that ends no longer holds the lag timestamp back, the ones still to come do. The records stay
    // in the source's form until their iteration decodes them (see RecordReader).
    const { items, reader } = nativeRecordsOf(batch);
    const iterations: { records: readonly unknown[]; unprocessed: UnprocessedSpan }[] = [];
    for (let start = 0; start < items.length; start += maxRows) {
      const records = items.slice(start, start + maxRows);
      iterations.push({ records, unprocessed: this.eventTimes.readRecords(stream, streamDelayMs, records, reader) });
    }
    const alignment = this.options.alignment;
    alignment?.begin();
    try {
      await this.ensureInitialized();
      for (const { records, unprocessed } of iterations) {
        if (signal.aborted) return;
        if (alignment) {
          // Before quota: a held partition asks for none, whatever its class (docs/design.md §12).
          await alignment.whenReadable(signal, (held) => context.hold?.(held));
          if (signal.aborted) return;
          alignment.noteRead(records.map((r) => reader.timestampMs(r)));
        }
        await this.iterate(records, reader, context, waits);
        unprocessed.done();
        this.consecutiveFailures = 0;
      }
    } catch (error) {
      this.outputs.clear();
      if (signal.aborted) return; // stopped mid-iteration: not a failure; the next owner resumes from the commit
      await this.fail(error, context, signal);
    } finally {
      // Revoked, stopped or rewound: these records are read again later (or elsewhere), not held here.
      for (const { unprocessed } of iterations) unprocessed.done();
      alignment?.end();
      waits.dispose();
      this.batchLinks.leave(linked);
    }
  }

  /** Applies a new dynamic_spec (the controller's `version`) to this job's throttler clients (docs/design.md §9.9). */
  reconfigure(spec: DynamicSpec, version?: number): void {
    this.options.throttlers.reconfigure(spec, version);
  }

  throttlerMetrics(): ThrottlerMetricsView[] {
    return this.options.throttlers.metrics().map((m) => throttlerMetricsView(this.options.computationName, m));
  }

  /** Adds this job's throttler sensors to a worker's running totals (once the job stopped). */
  foldThrottlerMetrics(into: RetiredThrottlerTotals): void {
    for (const [throttlerId, meters] of this.options.throttlers.meters()) into.fold(this.options.computationName, throttlerId, meters);
  }

  /** Stops the job: aborts waits, calls the computation's close(), returns prefetched quota. Idempotent. */
  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    this.stop.abort(new Error(`job ${this.id} stopped`));
    this.batchLinks.close();
    this.giveUpLinks.close();
    this.eventTimes.forget(this.options.stream);
    try {
      if (this.initialized) await this.options.computation.close?.(this.context);
    } catch (error) {
      this.options.log.warn(`job ${this.id}: close() failed: ${error instanceof Error ? error.message : String(error)}`);
    } finally {
      this.options.throttlers.close(`job ${this.id} stopped (take a new handle from the context of a running job)`);
    }
  }

  private ensureInitialized(): Promise<void> {
    this.initialized ??= Promise.resolve(this.options.computation.init?.(this.context));
    return this.initialized.catch((error: unknown) => {
      this.initialized = null; // init runs again on the restart
      throw error;
    });
  }

  private async iterate<R>(records: readonly R[], reader: RecordReader<R>, context: BatchContext, waits: BatchWaits): Promise<void> {
    const { signal } = waits;
    const { tracer, clock, stats, computationName, stream, partition } = this.options;
    const { messages, bytes } = this.decoder.decode(records, reader);
    const first = messages[0];
    const last = messages[messages.length - 1];
    if (!first || !last) return;
    const attributes: Attributes = {
      "sluice.pipeline": this.options.pipeline.pipeline,
      "sluice.computation": computationName,
      "sluice.job": this.id,
      "messaging.destination.name": stream,
      "messaging.destination.partition.id": String(partition),
      "messaging.batch.message_count": messages.length,
      "sluice.batch.bytes": bytes,
      "sluice.batch.first_offset": first.offset,
      "sluice.batch.last_offset": last.offset,
    };
    await tracer.startActiveSpan(this.iterationSpanName, { attributes }, async (span) => {
      try {
        this.options.throttlers.setPriority(this.eventTimes.lagTimestamp());
        const throttled = this.inputThrottle.acquire(messages.length, bytes, waits);
        // Not awaited when both pools answered at once: the quota did not bind.
        const giveBackUnits = typeof throttled === "function" ? throttled : await throttled;
        const nextOffset = (BigInt(last.offset) + 1n).toString();
        try {
          const batch: Batch = { stream, partition, messages };
          const processing = processInSpan(this.options, this.options.computation, batch, this.context);
          if (processing) await processing;
          if (signal.aborted) throw signal.reason;
          if (this.exactlyOnce) {
            await this.outputAndCommitTogether(context, nextOffset);
          } else {
            const flushing = this.output(this.options.sink);
            if (flushing) await flushing;
          }
        } finally {
          // docs/design.md §11.2: a concurrency throttler's units are the batch in flight, held from before
          // Process until its outputs are acknowledged (or the iteration failed).
          giveBackUnits();
        }
        if (!this.exactlyOnce) {
          // Read the sources, not `signal`: the commit may settle after the batch's linked signal was disposed.
          const stopped = () => signal.aborted || context.signal.aborted || this.stop.signal.aborted;
          commitInBackground(this.options, { id: this.id, log: this.options.log, stopped }, context, nextOffset);
        }
        stats.recordIteration(messages.length, bytes, last.timestampMs, clock.now());
      } catch (error) {
        failSpan(span, error);
        throw error;
      } finally {
        span.end();
      }
    });
  }

  private get exactlyOnce(): boolean {
    return this.options.pipeline.computations[this.options.computationName]?.delivery === "exactly_once";
  }

  /**
   * `delivery: "exactly_once"` (docs/design.md §13): Output sends into a transaction of this partition and
   * Commit adds the offset and commits it, so outputs and offset become visible together; a
   * failure aborts it and the iteration is redone from the last committed offset.
   */
  private async outputAndCommitTogether(context: BatchContext, nextOffset: string): Promise<void> {
    if (!context.beginTransaction) {
      throw new SluiceError(
        "SPEC_INVALID",
        `computations.${this.options.computationName}.delivery is "exactly_once", but the source of stream "${this.options.stream}" cannot commit outputs and offsets in one transaction; use Kafka or the memory log, or "at_least_once"`,
      );
    }
    const transaction = await context.beginTransaction();
    try {
      const { parts } = this.options.stats;
      await partInSpan(this.options, "Output", () => this.outputs.flush(transaction), parts.output);
      await partInSpan(this.options, "Commit", () => transaction.commit(nextOffset), parts.commit);
    } catch (error) {
      await transaction.abort();
      throw error;
    }
  }

  /** Output of at_least_once: the buffered messages sent and acknowledged, in the `Output` span; nothing to wait for (undefined) when none were emitted. */
  private output(sink: Pick<Sink, "send">): Promise<void> | undefined {
    const { parts } = this.options.stats;
    if (this.outputs.size === 0) {
      // Nothing to send: an Output that took no time, and no clock read for it.
      this.options.tracer.startSpan("Output").end();
      parts.output.recordMs(0);
      return undefined;
    }
    return partInSpan(this.options, "Output", () => this.outputs.flush(sink), parts.output);
  }

  /** A failed iteration fails the job: log, rewind to the last commit, back off, then go again. */
  private async fail(error: unknown, context: BatchContext, signal: AbortSignal): Promise<void> {
    const { min, max } = this.options.restartBackoffMs ?? { min: 100, max: 10_000 };
    const backoffMs = Math.min(max, min * 2 ** this.consecutiveFailures);
    this.consecutiveFailures += 1;
    this.options.stats.recordFailure(error);
    const reason = error instanceof Error ? error.message : String(error);
    this.options.log.error(
      `job ${this.id} failed (${this.consecutiveFailures} in a row): ${reason}; restarting from the last committed offset in ${backoffMs} ms`,
    );
    context.rewind();
    await this.options.clock.sleep(backoffMs, signal).catch(() => undefined);
  }
}
