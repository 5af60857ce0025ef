import type { Cancellation, CancelListener } from "@sluice/core";
import type { CallContext, CallMetadata } from "./quota-service.ts";

/**
 * One open call on a QuotaStream, and its CallContext: a single record per call, since a worker
 * may hold tens of thousands of waiting requests on one stream and whatever is kept per call is kept
 * that many times. Its cancellation is a Cancellation with one listener; the AbortSignal of the
 * CallContext is made only when something reads it (a watch, a renewal), not for a waiting grant.
 */
export class StreamCall implements CallContext, Cancellation {
  private controller: AbortController | null = null;
  private listener: CancelListener | null = null;
  private reason: unknown = undefined;
  private merged: CallMetadata | undefined;

  constructor(
    readonly callId: number,
    readonly deadlineAt: number | null,
    /** The call's own metadata entries, or null when it carried none (most calls). */
    private readonly own: Record<string, string> | null,
    private readonly streamMetadata: () => CallMetadata,
  ) {}

  /** Read only by what needs it (a span's trace context): the call's own entries over the stream's. */
  get metadata(): CallMetadata {
    this.merged ??= this.own === null ? this.streamMetadata() : { ...this.streamMetadata(), ...this.own };
    return this.merged;
  }

  get signal(): AbortSignal {
    if (this.controller === null) {
      this.controller = new AbortController();
      if (this.isCancelled) this.controller.abort(this.reason);
    }
    return this.controller.signal;
  }

  get cancellation(): Cancellation {
    return this;
  }

  get isCancelled(): boolean {
    return this.reason !== undefined;
  }

  get cancelReason(): unknown {
    return this.reason;
  }

  onCancel(listener: CancelListener | null): void {
    this.listener = listener;
  }

  /** Cancels the call once (cancel, deadline, the stream's end): its signal aborts, its listener hears. */
  cancel(reason: Error): void {
    if (this.reason !== undefined) return;
    this.reason = reason;
    this.controller?.abort(reason);
    const listener = this.listener;
    this.listener = null;
    listener?.cancelled(reason);
  }
}
