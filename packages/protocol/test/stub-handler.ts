import type { CallContext, DynamicSpecUpdate, QuotaServiceHandler, ReleaseQuotaCall, RequestQuotaCall, RequestQuotaResult } from "../src/index.ts";

/**
 * A scriptable QuotaServiceHandler for transport tests: each method does what the test assigns, and
 * every call is recorded with its context, so a test can see what crossed the transport.
 */
export class StubHandler implements QuotaServiceHandler {
  readonly requests: { call: RequestQuotaCall; context: CallContext }[] = [];
  readonly releases: ReleaseQuotaCall[] = [];
  onRequest: (call: RequestQuotaCall, context: CallContext) => Promise<RequestQuotaResult> = async (call) => ({
    granted: call.amount,
    waitedMs: 0,
  });
  /** The RequestQuota calls requestQuotaNow saw (see answerNow). */
  readonly requestsNow: { call: RequestQuotaCall; context: CallContext }[] = [];
  /**
   * Present only after answerNow(answer): the QuotaStream server then answers RequestQuota through
   * it (its answered-at-once path) instead of through requestQuota. `declare`, so that no field
   * holding undefined exists on a stub that has none.
   */
  declare requestQuotaNow?: (call: RequestQuotaCall, context: CallContext) => RequestQuotaResult | Promise<RequestQuotaResult>;
  onWatch: (emit: (update: DynamicSpecUpdate) => void, context: CallContext) => void | Promise<void> = (emit) => {
    emit({ version: 1, dynamicSpecJson: "{}" });
  };
  onUpdate: (json: string) => Promise<{ version: number }> = async () => ({ version: 2 });
  onDescribe: (context: CallContext) => Promise<{ snapshotJson: string }> = async () => ({ snapshotJson: "{}" });

  requestQuota(call: RequestQuotaCall, context: CallContext) {
    this.requests.push({ call, context });
    return this.onRequest(call, context);
  }
  /** Gives the stub a requestQuotaNow that records each call and answers with `answer`; none removes it. */
  answerNow(answer?: (call: RequestQuotaCall, context: CallContext) => RequestQuotaResult | Promise<RequestQuotaResult>): void {
    if (!answer) {
      delete this.requestQuotaNow;
      return;
    }
    this.requestQuotaNow = (call, context) => {
      this.requestsNow.push({ call, context });
      return answer(call, context);
    };
  }
  async releaseQuota(call: ReleaseQuotaCall) {
    this.releases.push(call);
  }
  watchDynamicSpec(_clientId: string, emit: (update: DynamicSpecUpdate) => void, context: CallContext) {
    return this.onWatch(emit, context);
  }
  updateDynamicSpec(json: string) {
    return this.onUpdate(json);
  }
  describeThrottlers(context: CallContext) {
    return this.onDescribe(context);
  }
}

/** Resolves when `signal` aborts (a handler that waits until the caller goes away). */
export function untilAborted(signal: AbortSignal): Promise<void> {
  return new Promise((resolve) => {
    if (signal.aborted) resolve();
    else signal.addEventListener("abort", () => resolve(), { once: true });
  });
}

export const quota = (overrides: Partial<RequestQuotaCall> = {}): RequestQuotaCall => ({
  throttlerId: "api",
  clientId: "w1/C/0",
  amount: 1,
  timestampMs: 0,
  quotaClassId: "",
  requestId: "r1",
  ...overrides,
});
