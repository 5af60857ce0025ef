import { status as GrpcStatus, type ClientDuplexStream, type StatusObject } from "@grpc/grpc-js";
import { systemClock, type SluiceError } from "@sluice/core";
import { streamCallTimeoutMs } from "./call-deadline.ts";
import { FrameBatcher, utf8Bound } from "./frame-batcher.ts";
import { DEFAULT_MAX_OPEN_CALLS_PER_STREAM } from "./quota-stream-limits.ts";
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

/** A call of this session: sent (open on the controller), or queued here until an open call ends. */
interface SessionCall {
  readonly pending: StreamPendingCall;
  readonly outgoing: OutgoingCall;
  sent: boolean;
}

export type QuotaStreamDuplex = ClientDuplexStream<WireQuotaStreamClientFrame, WireQuotaStreamServerFrame>;

/**
 * One open QuotaStream seen from the client: the calls waiting on it by call id, and the frame the
 * calls of this turn of the event loop go out in. When the stream ends — an error, a controller
 * that closed it, the client's own close — every call still on it fails with what ended it; the
 * next call opens a new stream.
 *
 * At most `maxOpen` calls are open on the controller at once (its `controller.max_open_calls_per_stream`,
 * docs/design.md §5.3); more wait here, in order, and go out as open ones are answered. A TOO_MANY_CALLS
 * answer (the controller's bound is lower than this client thought) puts the call back at the head
 * of that queue and lowers `maxOpen` to the bound it names: callers never see it.
 */
export class QuotaStreamSession {
  private readonly calls = new Map<number, SessionCall>();
  private readonly out: FrameBatcher<OutgoingCall>;
  /** Calls not sent yet, oldest first (a cancelled one is skipped when its turn comes). */
  private queued: number[] = [];
  private queuedHead = 0;
  private openCalls = 0;
  private ended = false;

  constructor(
    private readonly stream: QuotaStreamDuplex,
    private readonly onEnded: (session: QuotaStreamSession) => void,
    private maxOpen = DEFAULT_MAX_OPEN_CALLS_PER_STREAM,
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
        const entry = this.calls.get(answer.callId);
        if (!entry || !entry.sent) continue;
        if (answer.error?.sluiceErrorCode === "TOO_MANY_CALLS") {
          this.refusedAsTooMany(answer.callId, entry, answer.error.detailsJson);
          continue;
        }
        if (entry.pending.answer(answer)) this.forget(answer.callId, entry);
      }
      this.sendQueued();
    });
    stream.on("error", (error: unknown) => this.end(error));
    stream.on("status", (status: StatusObject) => {
      // A non-OK status also arrives as "error"; OK means the controller ended the stream itself
      // (it is shutting down): to the calls on it, the connection is gone.
      if (status.code === GrpcStatus.OK)
        this.end(
          Object.assign(new Error("the controller ended the quota stream"), {
            code: GrpcStatus.UNAVAILABLE,
            details: "the controller ended the quota stream (it may be shutting down)",
          }),
        );
    });
  }

  get isEnded(): boolean {
    return this.ended;
  }

  /** Calls open on the controller now (sent, not yet answered in full). */
  get openCallCount(): number {
    return this.openCalls;
  }

  /** Calls waiting here for an open call to end. */
  get queuedCallCount(): number {
    return this.calls.size - this.openCalls;
  }

  /**
   * Sends `call` in this turn's frame (or once an open call ends, past `maxOpen`), with the time
   * left until `deadlineAt` then; its answers go to `pending`.
   */
  send(call: WireQuotaStreamCall, pending: StreamPendingCall, deadlineAt?: number, size = callSize(call)): void {
    const entry: SessionCall = { pending, outgoing: { call, deadlineAt, size }, sent: false };
    this.calls.set(call.callId, entry);
    if (this.openCalls < this.maxOpen && this.queuedHead === this.queued.length) this.transmit(entry);
    else this.queued.push(call.callId);
  }

  /** Forgets the call and tells the controller, which cancels it (and refunds what it was granted). */
  cancel(callId: number): void {
    const entry = this.calls.get(callId);
    if (!entry) return;
    this.forget(callId, entry);
    if (this.ended || !entry.sent) return;
    this.out.push({ call: { callId, timeoutMs: 0, metadata: {}, cancel: {} }, deadlineAt: undefined, size: 48 });
    this.sendQueued();
  }

  private transmit(entry: SessionCall): void {
    entry.sent = true;
    this.openCalls += 1;
    this.out.push(entry.outgoing);
  }

  private forget(callId: number, entry: SessionCall): void {
    this.calls.delete(callId);
    if (entry.sent) this.openCalls -= 1;
  }

  /** Sends queued calls while fewer than `maxOpen` are open. */
  private sendQueued(): void {
    while (!this.ended && this.openCalls < this.maxOpen && this.queuedHead < this.queued.length) {
      const callId = this.queued[this.queuedHead++] as number;
      const entry = this.calls.get(callId);
      if (entry && !entry.sent) this.transmit(entry);
    }
    if (this.queuedHead === this.queued.length && this.queuedHead > 0) {
      this.queued = [];
      this.queuedHead = 0;
    }
  }

  /** The controller's bound is lower than ours: learn it, and send the call again when there is room. */
  private refusedAsTooMany(callId: number, entry: SessionCall, detailsJson: string): void {
    entry.sent = false;
    this.openCalls -= 1;
    this.maxOpen = Math.max(1, Math.min(this.maxOpen, boundOf(detailsJson) ?? this.openCalls));
    if (this.queuedHead > 0) this.queued[--this.queuedHead] = callId;
    else this.queued.unshift(callId);
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
    this.queued = [];
    this.queuedHead = 0;
    this.openCalls = 0;
    for (const call of calls) call.pending.fail(cause);
  }
}

/** `maxOpenCalls` of a TOO_MANY_CALLS answer's figures, if it names a usable one. */
function boundOf(detailsJson: string): number | undefined {
  try {
    const bound = (JSON.parse(detailsJson) as { maxOpenCalls?: unknown }).maxOpenCalls;
    return typeof bound === "number" && Number.isSafeInteger(bound) && bound >= 1 ? bound : undefined;
  } catch {
    return undefined;
  }
}

/** An upper bound of a call's encoded size, for the frame limit and the choice of transport. */
export function callSize(call: WireQuotaStreamCall): number {
  let size = 48;
  const metadata = call.metadata;
  for (const key in metadata) size += utf8Bound(key) + utf8Bound(metadata[key] ?? "") + 8;
  const request = call.requestQuota ?? call.releaseQuota;
  if (request) size += utf8Bound(request.throttlerId) + utf8Bound(request.clientId) + utf8Bound(request.quotaClassId) + utf8Bound(request.key ?? "");
  if (call.requestQuota) size += utf8Bound(call.requestQuota.requestId);
  if (call.renewLeases) {
    size += utf8Bound(call.renewLeases.clientId) + utf8Bound(call.renewLeases.key ?? "");
    for (const id of call.renewLeases.throttlerIds) size += utf8Bound(id) + 4;
  }
  if (call.watchDynamicSpec) size += utf8Bound(call.watchDynamicSpec.clientId);
  return size;
}
