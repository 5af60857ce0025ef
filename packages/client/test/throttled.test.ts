import assert from "node:assert/strict";
import { describe, it } from "node:test";
import {
  isSluiceError,
  LocalThrottler,
  ManualClock,
  QuotaBucketDriver,
  quotaBucketConfig,
  SluiceError,
  type ThrottleOptions,
  type Throttler,
} from "@sluice/core";
import { Subject, from, lastValueFrom, toArray } from "rxjs";
import { throttled } from "../src/index.ts";

/** A throttler that grants when the test says so, and records what it was asked. */
class GateThrottler implements Throttler {
  readonly asked: number[] = [];
  readonly aborted: number[] = [];
  private readonly pending: (() => void)[] = [];
  throttle(amount: number, options?: ThrottleOptions): Promise<void> {
    this.asked.push(amount);
    return new Promise((resolve, reject) => {
      this.pending.push(resolve);
      options?.signal?.addEventListener("abort", () => {
        this.aborted.push(amount);
        reject(new SluiceError("CANCELLED", "aborted"));
      });
    });
  }
  tryAcquire(): boolean {
    return false;
  }
  release(): void {}
  grant(): void {
    this.pending.shift()?.();
  }
}

const tick = () => new Promise((resolve) => setImmediate(resolve));

describe("throttled() rxjs operator (docs/design.md §14)", () => {
  it("waits for each value's quota in order and passes the values through", async () => {
    const gate = new GateThrottler();
    const seen: string[] = [];
    const source = new Subject<string>();
    source.pipe(throttled(gate, { cost: (letter) => letter.length })).subscribe((letter) => seen.push(letter));
    source.next("ab");
    source.next("cde");
    await tick();
    assert.deepEqual(seen, [], "nothing before its quota");
    assert.deepEqual(gate.asked, [2], "one wait at a time, in order");
    gate.grant();
    await tick();
    assert.deepEqual(seen, ["ab"]);
    assert.deepEqual(gate.asked, [2, 3]);
    gate.grant();
    await tick();
    assert.deepEqual(seen, ["ab", "cde"]);
  });

  it("aborts the pending wait when unsubscribed", async () => {
    const gate = new GateThrottler();
    const source = new Subject<number>();
    const subscription = source.pipe(throttled(gate)).subscribe();
    source.next(1);
    await tick();
    subscription.unsubscribe();
    await tick();
    assert.deepEqual(gate.aborted, [1]);
  });

  it("fails with QUEUE_FULL past maxBuffered instead of buffering without bound, or drops when told", async () => {
    const gate = new GateThrottler();
    const source = new Subject<number>();
    let failure: unknown;
    source.pipe(throttled(gate, { maxBuffered: 2 })).subscribe({ error: (error: unknown) => (failure = error) });
    for (const value of [1, 2, 3]) source.next(value);
    assert.ok(isSluiceError(failure, "QUEUE_FULL"), String(failure));
    assert.match((failure as Error).message, /2 values wait for quota \(maxBuffered 2\)/);
    await tick();
    assert.deepEqual(gate.aborted, [1], "the pending wait ends with the stream");

    const dropped: number[] = [];
    const other = new Subject<number>();
    other.pipe(throttled(new GateThrottler(), { maxBuffered: 1, overflow: "drop", onDropped: (v) => dropped.push(v) })).subscribe();
    for (const value of [1, 2, 3]) other.next(value);
    assert.deepEqual(dropped, [2, 3]);
  });

  it("completes after the last value got its quota, with a real throttler", async () => {
    const clock = new ManualClock();
    const local = new LocalThrottler(new QuotaBucketDriver("letters", quotaBucketConfig({ limit: 10, periodMs: 100 }), clock));
    const all = lastValueFrom(from([1, 2, 3, 4]).pipe(throttled(local), toArray()));
    await clock.advance(2_000);
    assert.deepEqual(await all, [1, 2, 3, 4]);
  });
});
