import { status as GrpcStatus, type ClientDuplexStream, type StatusObject } from "@grpc/grpc-js";
import { systemClock, type SluiceError } from "@sluice/core";
import { streamCallTimeoutMs } from "./call-deadline.ts";
import { FrameBatcher, utf8Bound } from "./frame-batcher.ts";
import type { WireQuotaStreamAnswer, WireQuotaStreamCall, WireQuotaStreamClientFrame, WireQuotaStreamServerFrame } from "./proto-definition.ts";

/** A call waiting on the stream for its answer(s). */
export interface StreamPendingCall {
  /** Handles one answer; returns true when the call is complete (it is then forgotten). */
  answer(answer: WireQuotaStreamAnswer): boolean;
  /** The stream ended under the call: `cause` is what the transport said (a grpc status, or a SluiceError of the client's own). */
  fail(cause: unknown): void;
}

/** A call waiting for this turn's frame; its remaining time is read when the frame leaves. */
interface OutgoingCall {
  readonly call: WireQuotaStreamCall;
  readonly deadlineAt: number | undefined;
  /** callSize(call), counted once by the sender. */
  readonly size: number;
}

export type QuotaStreamDuplex = ClientDuplexStream<WireQuotaStreamClientFrame, WireQuotaStreamServerFrame>;

/**
 * One open QuotaStream seen from the client: the calls waiting on it by call id, and the frame the
 * calls of this turn of the event loop go out in. When the stream ends — an error, a controller
 * that closed it, the client's own close — every call still on it fails with what ended it; the
 * next call opens a new stream.
 */
export class QuotaStreamSession {
  private readonly calls = new Map<number, StreamPendingCall>();
  private readonly out: FrameBatcher<OutgoingCall>;
  private ended = false;

  constructor(
    private readonly stream: QuotaStreamDuplex,
    private readonly onEnded: (session: QuotaStreamSession) => void,
  ) {
    this.out = new FrameBatcher(
      (outgoing) => {
        if (this.ended) return;
        const now = systemClock.now();
        const calls = outgoing.map(({ call, deadlineAt }) => (deadlineAt === undefined ? call : { ...call, timeoutMs: streamCallTimeoutMs(deadlineAt, now) }));
        this.stream.write({ calls });
      },
      (outgoing) => outgoing.size,
    );
    stream.on("data", (frame: WireQuotaStreamServerFrame) => {
      for (const answer of frame.answers) {
        const pending = this.calls.get(answer.callId);
        if (pending && pending.answer(answer)) this.calls.delete(answer.callId);
      }
    });
    stream.on("error", (error: unknown) => this.end(error));
    stream.on("status", (status: StatusObject) => {
      // A non-OK status also arrives as "error"; OK means the controller ended the stream itself
      // (it is shutting down): to the calls on it, the connection is gone.
      if (status.code === GrpcStatus.OK) this.end(Object.assign(new Error("the controller ended the quota stream"), { code: GrpcStatus.UNAVAILABLE, details: "the controller ended the quota stream (it may be shutting down)" }));
    });
  }

  get isEnded(): boolean {
    return this.ended;
  }

  /** Sends `call` in this turn's frame, with the time left until `deadlineAt` then; its answers go to `pending`. */
  send(call: WireQuotaStreamCall, pending: StreamPendingCall, deadlineAt?: number, size = callSize(call)): void {
    this.calls.set(call.callId, pending);
    this.out.push({ call, deadlineAt, size });
  }

  /** Forgets the call and tells the controller, which cancels it (and refunds what it was granted). */
  cancel(callId: number): void {
    if (!this.calls.delete(callId) || this.ended) return;
    this.out.push({ call: { callId, timeoutMs: 0, metadata: {}, cancel: {} }, deadlineAt: undefined, size: 48 });
  }

  /** Fails every call with `error` and cancels the stream. */
  close(error: SluiceError): void {
    this.end(error);
    this.stream.cancel();
  }

  private end(cause: unknown): void {
    if (this.ended) return;
    this.ended = true;
    this.out.discard();
    this.onEnded(this);
    const calls = [...this.calls.values()];
    this.calls.clear();
    for (const call of calls) call.fail(cause);
  }
}

/** An upper bound of a call's encoded size, for the frame limit and the choice of transport. */
export function callSize(call: WireQuotaStreamCall): number {
  let size = 48;
  const metadata = call.metadata;
  for (const key in metadata) size += utf8Bound(key) + utf8Bound(metadata[key] ?? "") + 8;
  const request = call.requestQuota ?? call.releaseQuota;
  if (request) size += utf8Bound(request.throttlerId) + utf8Bound(request.clientId) + utf8Bound(request.quotaClassId);
  if (call.requestQuota) size += utf8Bound(call.requestQuota.requestId);
  if (call.renewLeases) {
    size += utf8Bound(call.renewLeases.clientId);
    for (const id of call.renewLeases.throttlerIds) size += utf8Bound(id) + 4;
  }
  if (call.watchDynamicSpec) size += utf8Bound(call.watchDynamicSpec.clientId);
  return size;
}
