import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { ManualClock, QuotaBucketDriver, isSluiceError, quotaBucketConfig, type Cancellation, type CancelListener } from "../src/index.ts";

/** A Cancellation as a transport offers it: one listener, told once. */
class TestCancellation implements Cancellation {
  listener: CancelListener | null = null;
  cancelReason: unknown = undefined;

  get isCancelled(): boolean {
    return this.cancelReason !== undefined;
  }

  onCancel(listener: CancelListener | null): void {
    this.listener = listener;
  }

  cancel(reason: Error): void {
    this.cancelReason = reason;
    const listener = this.listener;
    this.listener = null;
    listener?.cancelled(reason);
  }
}

describe("QuotaBucketDriver with a Cancellation instead of an AbortSignal", () => {
  it("detaches the request when its only caller is cancelled, and a retry with the same id resumes its place", async () => {
    const clock = new ManualClock();
    const d = new QuotaBucketDriver("api", quotaBucketConfig({ limit: 0 }), clock);
    const cancellation = new TestCancellation();
    const first = d.acquire({ amount: 1, requestId: "r1", cancellation, onAbort: "detach" });
    assert.ok(cancellation.listener, "the waiter listens on the cancellation");
    cancellation.cancel(new Error("stream ended"));
    await assert.rejects(first, (e: unknown) => isSluiceError(e, "CANCELLED") && /stream ended/.test(e.message));
    assert.equal(d.snapshot().pendingRequests, 0);
    assert.equal(d.snapshot().detachedRequests, 1, "detached, not cancelled: it keeps its place");
    const retry = d.acquire({ amount: 1, requestId: "r1" });
    d.reconfigure(quotaBucketConfig({ limit: null }));
    assert.equal((await retry).granted, 1);
    assert.equal(d.snapshot().counters.reattached, 1);
  });

  it("keeps a joined request waiting while one of three callers is cancelled, and stops listening once granted", async () => {
    const clock = new ManualClock();
    const d = new QuotaBucketDriver("api", quotaBucketConfig({ limit: 0 }), clock);
    const [ca, cb, cc] = [new TestCancellation(), new TestCancellation(), new TestCancellation()];
    const a = d.acquire({ amount: 2, requestId: "x", cancellation: ca });
    const b = d.acquire({ amount: 2, requestId: "x", cancellation: cb });
    const c = d.acquire({ amount: 2, requestId: "x", cancellation: cc });
    cb.cancel(new Error("b gave up")); // the middle of the list
    await assert.rejects(b, (e: unknown) => isSluiceError(e, "CANCELLED"));
    ca.cancel(new Error("a gave up")); // the head
    await assert.rejects(a, (e: unknown) => isSluiceError(e, "CANCELLED"));
    assert.equal(d.snapshot().pendingRequests, 1, "c still waits");
    d.reconfigure(quotaBucketConfig({ limit: null }));
    assert.equal((await c).granted, 2);
    assert.equal(cc.listener, null, "the granted waiter no longer listens");
    assert.equal(d.snapshot().counters.granted, 2);
  });

  it("refuses at once a request whose cancellation has already fired", async () => {
    const clock = new ManualClock();
    const d = new QuotaBucketDriver("api", quotaBucketConfig({ limit: 0 }), clock);
    const cancellation = new TestCancellation();
    cancellation.cancel(new Error("gone"));
    await assert.rejects(d.acquire({ amount: 1, cancellation }), (e: unknown) => isSluiceError(e, "CANCELLED"));
    assert.equal(d.snapshot().pendingRequests, 0);
  });
});
