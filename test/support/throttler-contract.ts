// The Throttler contract (packages/core/src/throttler.ts), run once per implementation behind a
// throttler handle (test/integration/throttler-contract.test.ts): the local bucket, and the
// prefetching, paced (smooth) and concurrency clients of a real controller. Whatever serves the
// quota, user code sees the same: quota that is there is granted, a call that cannot be served
// waits, an abort ends the wait with CANCELLED, tryAcquire never waits, and a bad amount is refused
// with INVALID_AMOUNT. Real clock; only bounds from above far past what a loaded machine adds.
import assert from "node:assert/strict";
import { describe, it, type TestContext } from "node:test";
import { isSluiceError, type SluiceError, type Throttler } from "@sluice/core";

export interface ThrottlerSubject {
  /** A throttler with plenty of quota (1,000 units a second, or 1,000 in use at once). */
  open(t: TestContext): Promise<Throttler>;
  /** A throttler that has nothing to grant now (limit 0, or all of its units in use). */
  closed(t: TestContext): Promise<Throttler>;
}

/** A wait that must end: far past a refill RPC on a loaded machine. */
const ANSWER_MS = 30_000;

function within<T>(promise: Promise<T>, ms: number, what: string): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new Error(`${what}: no answer in ${ms / 1000} s`)), ms);
  });
  return Promise.race([promise, timeout]).finally(() => clearTimeout(timer));
}

const refusedWith = (code: SluiceError["code"]) => (error: unknown) => {
  assert.ok(isSluiceError(error, code), `expected ${code}, got ${String(error)}`);
  return true;
};

export function throttlerContract(name: string, subject: ThrottlerSubject): void {
  describe(`Throttler contract: ${name}`, { timeout: 120_000 }, () => {
    it("grants quota that is there, repeatedly", async (t) => {
      const throttler = await subject.open(t);
      for (let i = 0; i < 5; i++) await within(throttler.throttle(1), ANSWER_MS, `throttle(1) #${i + 1}`);
    });

    it("keeps a call that cannot be served waiting, and ends it with CANCELLED when its signal aborts", async (t) => {
      const throttler = await subject.closed(t);
      const stop = new AbortController();
      let settled = false;
      const waiting = throttler.throttle(1, { signal: stop.signal }).finally(() => (settled = true));
      waiting.catch(() => undefined);
      // Long enough for a refill RPC to come back empty: the call still waits.
      await new Promise((resolve) => setTimeout(resolve, 300));
      assert.equal(settled, false, "throttle(1) on a throttler at limit 0 still waits");
      stop.abort(new Error("caller gave up"));
      await assert.rejects(within(waiting, ANSWER_MS, "the aborted throttle(1)"), refusedWith("CANCELLED"));
    });

    it("refuses a call whose signal was aborted before it with CANCELLED", async (t) => {
      const throttler = await subject.open(t);
      const stop = new AbortController();
      stop.abort(new Error("already gone"));
      await assert.rejects(within(throttler.throttle(1, { signal: stop.signal }), ANSWER_MS, "throttle with an aborted signal"), refusedWith("CANCELLED"));
    });

    it("tryAcquire never waits: false at once where nothing is granted", async (t) => {
      const throttler = await subject.closed(t);
      assert.equal(throttler.tryAcquire(1), false);
    });

    it("refuses NaN, a negative amount and Infinity with INVALID_AMOUNT", async (t) => {
      const throttler = await subject.open(t);
      for (const amount of [Number.NaN, -1, Number.POSITIVE_INFINITY]) {
        await assert.rejects(
          within(
            Promise.resolve().then(() => throttler.throttle(amount)),
            ANSWER_MS,
            `throttle(${amount})`,
          ),
          refusedWith("INVALID_AMOUNT"),
        );
      }
    });
  });
}
