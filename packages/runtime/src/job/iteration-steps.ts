import type { Span, Tracer } from "@opentelemetry/api";
import type { Clock } from "@sluice/core";
import type { Batch, Computation, Logger, RuntimeContext } from "../computation.ts";
import type { BatchContext } from "../ports/source.ts";
import type { ComputationStats } from "./computation-stats.ts";
import { failSpan } from "./fail-span.ts";
import type { PartHistogram } from "./iteration-parts.ts";

// The steps of a job's iteration (docs/design.md §3) that run in spans of their own and are timed into
// the computation's part histograms (docs/design.md §15): Process, a part the iteration waits for
// (Output, Commit), and the at-least-once Commit it does not wait for.

/** What the steps record into. */
export interface StepObservers {
  readonly tracer: Tracer;
  readonly clock: Clock;
  readonly stats: ComputationStats;
}

/**
 * The computation's Process in its span. A process() that returns no promise ends its span at
 * once and this returns undefined, so the iteration does not wait a turn for it: an async
 * function and two promises per iteration showed in a busy job's profile.
 */
export function processInSpan(
  { tracer, clock, stats }: StepObservers,
  computation: Computation,
  batch: Batch,
  context: RuntimeContext,
): Promise<void> | undefined {
  return tracer.startActiveSpan("Process", (span: Span) => {
    const startedAt = clock.now();
    let result: unknown;
    try {
      result = computation.process(batch, context);
    } catch (error) {
      failSpan(span, error);
      stats.parts.process.recordMs(clock.now() - startedAt);
      span.end();
      throw error;
    }
    if (!isPromiseLike(result)) {
      stats.parts.process.recordMs(clock.now() - startedAt);
      span.end();
      return undefined;
    }
    return Promise.resolve(result).then(
      () => {
        stats.parts.process.recordMs(clock.now() - startedAt);
        span.end();
      },
      (error: unknown) => {
        failSpan(span, error);
        stats.parts.process.recordMs(clock.now() - startedAt);
        span.end();
        throw error;
      },
    );
  });
}

/** `work` in a child span named `name`; its duration goes to `part` (docs/design.md §15), read where the span starts and ends. */
export async function partInSpan(
  { tracer, clock }: Pick<StepObservers, "tracer" | "clock">,
  name: string,
  work: () => Promise<void>,
  part: PartHistogram,
): Promise<void> {
  await tracer.startActiveSpan(name, async (span: Span) => {
    const startedAt = clock.now();
    try {
      await work();
    } catch (error) {
      failSpan(span, error);
      throw error;
    } finally {
      part.recordMs(clock.now() - startedAt);
      span.end();
    }
  });
}

/**
 * Hands the offset to the source and goes on without waiting for the broker: the outputs before
 * it are acknowledged, so the commit may land later (the Kafka source merges them) without
 * weakening at-least-once. A commit that never lands only means a restart repeats these rows.
 *
 * The `Commit` span (a child of the iteration's) starts now and ends when the source says the
 * offset is durable, or with the commit's error: it shows what the commit waited for (the merge
 * interval, the broker) and whether it failed, without the job waiting for it. A child ended
 * later rather than a linked span, so the trace keeps docs/design.md §3's shape; it may end after its
 * parent. `stopped()` says whether the batch was revoked or the job stopped by the time a commit
 * fails: then the next owner resumes from the last durable commit, and nothing is worth a warning.
 */
export function commitInBackground(
  { tracer, clock, stats }: StepObservers,
  job: { readonly id: string; readonly log: Logger; readonly stopped: () => boolean },
  context: BatchContext,
  nextOffset: string,
): void {
  const span = tracer.startSpan("Commit", { attributes: { "sluice.commit.offset": nextOffset } });
  const startedAt = clock.now();
  let durable: Promise<void>;
  try {
    durable = context.commit(nextOffset);
  } catch (error) {
    // A source that refuses at once (not a merged commit failing later) fails the iteration.
    failSpan(span, error);
    span.end();
    throw error;
  }
  durable.then(
    () => {
      span.setAttribute("sluice.commit.durable", true);
      stats.parts.commit.recordMs(clock.now() - startedAt);
      span.end();
    },
    (error: unknown) => {
      span.setAttribute("sluice.commit.durable", false);
      failSpan(span, error);
      stats.parts.commit.recordMs(clock.now() - startedAt);
      span.end();
      if (job.stopped()) return;
      const reason = error instanceof Error ? error.message : String(error);
      job.log.warn(`job ${job.id}: ${reason}; rows before offset ${nextOffset} are processed again if the job restarts before a later commit`);
    },
  );
}

function isPromiseLike(value: unknown): value is PromiseLike<unknown> {
  return typeof value === "object" && value !== null && typeof (value as { then?: unknown }).then === "function";
}
