// InputThrottle alone, over scripted throttlers (pure logic): the answer is synchronous when both
// pools answer, a failure stops the partner's wait and gives back what it was granted, and the
// give-up signal is one per batch delivery, not one per iteration.
import assert from "node:assert/strict";
import { after, describe, it } from "node:test";
import { InMemorySpanExporter, SimpleSpanProcessor } from "@opentelemetry/sdk-trace-base";
import { NodeTracerProvider } from "@opentelemetry/sdk-trace-node";
import { ManualClock, RESOLVED, SluiceError, type ThrottleOptions, type Throttler } from "@sluice/core";
import { validateDynamicSpec, type DynamicSpec } from "@sluice/spec";
import { SharedLinks } from "../src/job/shared-links.ts";
import { BatchWaits, InputThrottle, NOTHING_HELD } from "../src/job/input-throttle.ts";
import { ComputationStats } from "../src/job/computation-stats.ts";

const exporter = new InMemorySpanExporter();
const provider = new NodeTracerProvider({ spanProcessors: [new SimpleSpanProcessor(exporter)] });
after(() => provider.shutdown());

/** A throttler that answers from its pool when told to, else waits until `grant()` or its signal. */
class ScriptedThrottler implements Throttler {
  immediate = true;
  released = 0;
  readonly signals: AbortSignal[] = [];
  private pending: { resolve: () => void; reject: (error: unknown) => void } | null = null;

  throttle(_amount: number, options?: ThrottleOptions): Promise<void> {
    if (options?.signal) this.signals.push(options.signal);
    if (this.immediate) return RESOLVED;
    return new Promise<void>((resolve, reject) => {
      this.pending = { resolve, reject };
      options?.signal?.addEventListener("abort", () => reject(new SluiceError("CANCELLED", "stopped by its partner")), { once: true });
    });
  }

  grant(): void {
    this.pending?.resolve();
  }

  fail(error: unknown): void {
    this.pending?.reject(error);
  }

  tryAcquire(): boolean {
    return true;
  }

  /** Set: release() throws it after counting (a concurrency client whose lease expired). */
  releaseError: Error | null = null;

  release(amount: number): void {
    this.released += amount;
    if (this.releaseError) throw this.releaseError;
  }
}

function dynamicSpec(throttlers: Record<string, unknown>): DynamicSpec {
  const parsed = validateDynamicSpec({ throttlers, computations: { Count: { input_rows_throttler_id: "rows", input_bytes_throttler_id: "bytes" } } });
  if (!parsed.ok) throw new Error(JSON.stringify(parsed.issues));
  return parsed.value;
}

function setup(throttlers: Record<string, unknown> = { rows: {}, bytes: {} }) {
  const spec = dynamicSpec(throttlers);
  const rows = new ScriptedThrottler();
  const bytes = new ScriptedThrottler();
  const byId: Record<string, ScriptedThrottler> = { rows, bytes };
  const clock = new ManualClock(1_000);
  const stats = new ComputationStats("Count");
  const input = new InputThrottle({
    computationName: "Count",
    throttlers: {
      classIdFor: () => "",
      priority: 0,
      getThrottlerOrThrow: (id: string) => byId[id] as never,
      isConcurrency: (id: string) => spec.throttlers[id]?.kind === "concurrency",
    },
    dynamicSpec: () => spec,
    tracer: provider.getTracer("input-throttle-test"),
    clock,
    stats,
  });
  const source = new AbortController();
  const job = new AbortController();
  const giveUps = new SharedLinks(job.signal);
  const waits = () => new BatchWaits(source.signal, source.signal, giveUps);
  return { rows, bytes, clock, stats, input, waits };
}

describe("InputThrottle", () => {
  it("answers synchronously when both pools answer: no promise, no wait recorded, wait_ms 0", () => {
    exporter.reset();
    const { rows, bytes, stats, input, waits } = setup();
    const batch = waits();
    const answer = input.acquire(100, 2_000, batch);
    assert.equal(answer, NOTHING_HELD, "a function at once, not a promise");
    assert.equal(stats.throttleWaitMs, 0);
    const [span] = exporter.getFinishedSpans();
    assert.equal(span?.name, "Input.Throttle");
    assert.equal(span?.attributes["sluice.throttle.wait_ms"], 0);
    assert.equal(span?.attributes["sluice.throttle.rows.amount"], 100);
    assert.equal(span?.attributes["sluice.throttle.bytes.amount"], 2_000);
    // Both waits got the batch's shared give-up signal, and a second iteration gets the same one.
    input.acquire(100, 2_000, batch);
    assert.equal(rows.signals.length, 2);
    assert.equal(rows.signals[0], bytes.signals[0]);
    assert.equal(rows.signals[1], rows.signals[0]);
    batch.dispose();
  });

  it("waits for the slower pool and records the wait in the span and the stats", async () => {
    exporter.reset();
    const { bytes, clock, stats, input, waits } = setup();
    bytes.immediate = false;
    const answer = input.acquire(10, 10, waits());
    assert.ok(answer instanceof Promise);
    await clock.advance(25);
    bytes.grant();
    assert.equal(await answer, NOTHING_HELD);
    assert.equal(stats.throttleWaitMs, 25);
    assert.equal(exporter.getFinishedSpans()[0]?.attributes["sluice.throttle.wait_ms"], 25);
  });

  it("when one throttler fails, the other's wait stops and what it was granted goes back", async () => {
    const { rows, bytes, input, waits } = setup();
    rows.immediate = true; // granted at once, so it must be given back
    bytes.immediate = false;
    const batch = waits();
    const answer = input.acquire(7, 300, batch);
    bytes.fail(new SluiceError("RETRIES_EXHAUSTED", "controller gone"));
    await assert.rejects(Promise.resolve(answer), /controller gone/);
    assert.equal(rows.released, 7);
    assert.equal(rows.signals[0]?.aborted, true, "the shared give-up signal was aborted");
    batch.dispose();
    // The next batch gets a fresh give-up signal: an aborted one is never handed out again.
    bytes.immediate = true;
    input.acquire(7, 300, waits());
    assert.equal(rows.signals[1]?.aborted, false);
  });

  it("stops a partner that still waits when the other fails", async () => {
    const { rows, bytes, input, waits } = setup();
    rows.immediate = false;
    bytes.immediate = false;
    const answer = input.acquire(7, 300, waits());
    rows.fail(new SluiceError("QUEUE_FULL", "too many waiting"));
    await assert.rejects(Promise.resolve(answer), /too many waiting/);
    assert.equal(bytes.signals[0]?.aborted, true);
    assert.equal(bytes.released, 0, "nothing was granted to it");
  });

  it("gives back a concurrency throttler's units only when asked to", () => {
    const { rows, bytes, input, waits } = setup({ rows: { kind: "concurrency", limit: 1_000 }, bytes: {} });
    const giveBack = input.acquire(5, 50, waits());
    assert.equal(typeof giveBack, "function");
    assert.notEqual(giveBack, NOTHING_HELD);
    assert.equal(rows.released, 0);
    (giveBack as () => void)();
    assert.equal(rows.released, 5);
    assert.equal(bytes.released, 0);
  });

  it("fails the iteration when a concurrency throttler's units were lost (LEASE_EXPIRED), after giving back both throttlers' units", () => {
    const { rows, bytes, input, waits } = setup({ rows: { kind: "concurrency", limit: 1_000 }, bytes: { kind: "concurrency", limit: 10_000 } });
    const giveBack = input.acquire(5, 50, waits()) as () => void;
    const expired = new SluiceError("LEASE_EXPIRED", 'throttler "rows": the controller no longer counts 5 of the units client "w" held');
    rows.releaseError = expired;
    assert.throws(giveBack, (error: unknown) => error === expired);
    assert.equal(bytes.released, 50, "the other throttler's units still go back");
  });

  it("does not fail the iteration for other release errors (a throttler removed meanwhile)", () => {
    const { rows, input, waits } = setup({ rows: { kind: "concurrency", limit: 1_000 }, bytes: {} });
    const giveBack = input.acquire(5, 50, waits()) as () => void;
    rows.releaseError = new SluiceError("THROTTLER_REMOVED", "removed");
    giveBack();
  });
});
