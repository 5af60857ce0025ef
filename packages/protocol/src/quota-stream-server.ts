import { status as GrpcStatus, type Metadata, type ServerDuplexStream } from "@grpc/grpc-js";
import { SluiceError, systemClock } from "@sluice/core";
import { AUTHORIZATION_METADATA_KEY, fromGrpcMetadata } from "./call-metadata.ts";
import { deadlineAnswer, streamCallDeadline } from "./call-deadline.ts";
import { toServiceError } from "./error-mapping.ts";
import { FrameBatcher, utf8Bound } from "./frame-batcher.ts";
import { fromGrpcDeadline } from "./grpc-deadline.ts";
import type {
  WireQuotaStreamAnswer,
  WireQuotaStreamCall,
  WireQuotaStreamClientFrame,
  WireQuotaStreamServerFrame,
} from "./proto-definition.ts";
import { streamErrorOfStatus, toStreamError } from "./quota-stream-errors.ts";
import type { CallContext, CallMetadata, QuotaServiceHandler } from "./quota-service.ts";
import { UndecodableRequest } from "./request-decoding.ts";
import { toUint64 } from "./uint64.ts";

// The server side of QuotaStream (quota.proto): each call on the stream runs through the same
// handler methods as its unary RPC, with a CallContext of its own (deadline from timeout_ms, a
// signal that aborts on cancel, on the stream's end and at the deadline). Answers that become ready
// in one turn of the event loop leave in one frame.

type Authorize = (header: unknown) => SluiceError | null;
type Duplex = ServerDuplexStream<WireQuotaStreamClientFrame | UndecodableRequest, WireQuotaStreamServerFrame>;

/** The streams a server has open, so that its close can end them once their calls are answered. */
export class OpenQuotaStreams {
  private readonly streams = new Set<ServedQuotaStream>();
  private closing = false;

  add(stream: ServedQuotaStream): void {
    if (this.closing) stream.endWhenIdle();
    else this.streams.add(stream);
  }

  delete(stream: ServedQuotaStream): void {
    this.streams.delete(stream);
  }

  /** Ends every stream as soon as it has no call open (the handler answers them as it shuts down). */
  closeAll(): void {
    this.closing = true;
    for (const stream of this.streams) stream.endWhenIdle();
  }
}

/** The QuotaStream method of a QuotaService implementation. */
export function quotaStreamMethod(handler: QuotaServiceHandler, authorize: Authorize, open: OpenQuotaStreams): (call: Duplex) => void {
  return (call) => {
    const refusal = authorize(call.metadata.get(AUTHORIZATION_METADATA_KEY)[0]);
    if (refusal) {
      call.emit("error", toServiceError(refusal));
      return;
    }
    new ServedQuotaStream(call, handler, open);
  };
}

/**
 * One open call. Kept small — a worker may hold tens of thousands of waiting requests on one stream
 * — and reached only through the stream's map.
 */
interface OpenCall {
  readonly abort: AbortController;
  timer: NodeJS.Timeout | undefined;
}

/** Reason of the signal of every call a stream's end cancels (one value: nobody reads it per call). */
const STREAM_ENDED = new Error("the client ended the quota stream or its connection dropped");
const CALL_CANCELLED = new Error("the client cancelled the call");
const DEADLINE_PASSED = new Error("the call's deadline passed");

class ServedQuotaStream {
  private readonly calls = new Map<number, OpenCall>();
  private readonly out: FrameBatcher<WireQuotaStreamAnswer>;
  private readonly streamDeadlineAt: number | null;
  private streamMetadata: CallMetadata | undefined;
  private ended = false;
  private endingWhenIdle = false;

  constructor(
    private readonly call: Duplex,
    private readonly handler: QuotaServiceHandler,
    private readonly open: OpenQuotaStreams,
  ) {
    this.out = new FrameBatcher((answers) => this.write(answers), answerSize);
    this.streamDeadlineAt = fromGrpcDeadline(call.getDeadline());
    open.add(this);
    call.on("data", (frame: WireQuotaStreamClientFrame | UndecodableRequest) => this.receive(frame));
    // The client half-closed, cancelled, or the connection dropped: every call still open is
    // cancelled, as a cancelled unary call would be (its quota is refunded).
    call.on("end", () => this.end(null));
    call.on("cancelled", () => this.end(null));
    call.on("error", () => this.end(null));
  }

  /** Ends the stream (OK) once no call is open; at once when none is. */
  endWhenIdle(): void {
    this.endingWhenIdle = true;
    if (this.calls.size === 0) this.end(null);
  }

  private receive(frame: WireQuotaStreamClientFrame | UndecodableRequest): void {
    if (this.ended) return;
    if (frame instanceof UndecodableRequest) {
      this.end(frame.error);
      return;
    }
    const receivedAt = systemClock.now();
    for (const entry of frame.calls) this.start(entry, receivedAt);
  }

  private start(entry: WireQuotaStreamCall, receivedAt: number): void {
    const callId = entry.callId;
    if (entry.call === "cancel") {
      this.cancel(callId);
      return;
    }
    const refusal = this.refusal(entry);
    if (refusal) {
      this.out.push({ callId, error: toStreamError(refusal) });
      return;
    }
    const abort = new AbortController();
    const open: OpenCall = { abort, timer: undefined };
    this.calls.set(callId, open);
    const deadlineAt = streamCallDeadline(entry.timeoutMs, this.streamDeadlineAt, receivedAt);
    const method = methodName(entry);
    if (deadlineAt !== null) {
      open.timer = setTimeout(() => {
        // The handler usually answers QUOTA_TIMEOUT itself first, with more to say; this is the
        // guarantee that a call is answered at its deadline whatever the handler does.
        this.finish(callId, open, { callId, error: toStreamError(deadlineAnswer(method, deadlineAt)) });
        abort.abort(DEADLINE_PASSED);
      }, Math.max(0, deadlineAt - systemClock.now()));
    }
    const context = this.context(entry, deadlineAt, abort.signal);
    const fail = (error: unknown) => this.finish(callId, open, { callId, error: toStreamError(error ?? new Error("the handler rejected without a reason")) });
    // Whatever the handler does — throw synchronously, reject, return garbage — the call gets one
    // answer and the stream keeps serving the others.
    Promise.resolve()
      .then(() => this.run(entry, callId, open, context))
      .then((answer) => {
        if (answer) this.finish(callId, open, answer);
      }, fail);
  }

  /** The handler's answer to one call; undefined for a watch, which answers as it goes. */
  private async run(entry: WireQuotaStreamCall, callId: number, open: OpenCall, context: CallContext): Promise<WireQuotaStreamAnswer | undefined> {
    const handler = this.handler;
    if (entry.requestQuota) {
      const request = entry.requestQuota;
      // Field by field, as the unary server does, so a field added to the proto never leaks in.
      const result = await handler.requestQuota(
        {
          throttlerId: request.throttlerId,
          clientId: request.clientId,
          amount: request.amount,
          timestampMs: request.timestampMs,
          quotaClassId: request.quotaClassId,
          requestId: request.requestId,
        },
        context,
      );
      return {
        callId,
        requestQuota: {
          granted: result.granted,
          waitedMs: toUint64(result.waitedMs),
          paceStartDelayMs: result.paceStartDelayMs ?? 0,
          paceIntervalMs: result.paceIntervalMs ?? 0,
        },
      };
    }
    if (entry.releaseQuota) {
      const request = entry.releaseQuota;
      await handler.releaseQuota(
        { throttlerId: request.throttlerId, clientId: request.clientId, amount: request.amount, quotaClassId: request.quotaClassId },
        context,
      );
      return { callId, releaseQuota: {} };
    }
    if (entry.renewLeases) {
      if (!handler.renewLeases) {
        throw new SluiceError("CONTROLLER_UNAVAILABLE", "this controller does not implement RenewLeases (concurrency throttlers)");
      }
      const result = await handler.renewLeases({ clientId: entry.renewLeases.clientId, throttlerIds: [...entry.renewLeases.throttlerIds] }, context);
      return { callId, renewLeases: { held: result.held } };
    }
    // refusal() let nothing else through: a watch.
    const watch = entry.watchDynamicSpec ?? { clientId: "" };
    const ended = handler.watchDynamicSpec(
      watch.clientId,
      (update) => {
        if (this.calls.get(callId) !== open) return;
        this.out.push({ callId, dynamicSpecUpdate: { version: toUint64(update.version), dynamicSpecJson: update.dynamicSpecJson } });
      },
      context,
    );
    if (ended === undefined) return undefined; // open until the client cancels it or the stream ends
    await ended;
    // The handler ended the watch cleanly: to the client that is a lost watch, it reconnects (as
    // over the unary WatchDynamicSpec, where the stream ends).
    return {
      callId,
      error: streamErrorOfStatus({
        code: GrpcStatus.UNAVAILABLE,
        details: "the controller ended the dynamic_spec watch; reconnect to keep watching",
      }),
    };
  }

  /** Why a call cannot start, answered under its own call id; null when it can. */
  private refusal(entry: WireQuotaStreamCall): SluiceError | null {
    const callId = entry.callId;
    if (entry.call === undefined) {
      return new SluiceError(
        "INVALID_REQUEST",
        `QuotaStream: call ${callId} names no call (set one of request_quota, release_quota, renew_leases, watch_dynamic_spec, cancel)`,
        { method: "QuotaStream", callId },
      );
    }
    if (!(callId > 0)) {
      return new SluiceError("INVALID_REQUEST", `QuotaStream: call_id must be a number above 0, got ${callId} (${entry.call})`, {
        method: "QuotaStream",
        callId,
      });
    }
    if (this.calls.has(callId)) {
      return new SluiceError(
        "INVALID_REQUEST",
        `QuotaStream: call_id ${callId} is already open on this stream (${entry.call}); choose an id unique among the stream's open calls`,
        { method: "QuotaStream", callId },
      );
    }
    return null;
  }

  private context(entry: WireQuotaStreamCall, deadlineAt: number | null, signal: AbortSignal): CallContext {
    const own = entry.metadata;
    const streamMetadata = () => (this.streamMetadata ??= fromGrpcMetadata(this.call.metadata as Metadata));
    let merged: CallMetadata | undefined;
    return {
      deadlineAt,
      signal,
      // Read only by what needs it (a span's trace context): the call's own entries over the stream's.
      get metadata() {
        merged ??= Object.keys(own).length === 0 ? streamMetadata() : { ...streamMetadata(), ...own };
        return merged;
      },
    };
  }

  private cancel(callId: number): void {
    const open = this.calls.get(callId);
    if (!open) return; // answered already: the cancel crossed the answer on the wire
    this.forget(callId, open);
    open.abort.abort(CALL_CANCELLED);
  }

  /** Sends `answer` if the call is still open (the first answer wins: handler, deadline or cancel). */
  private finish(callId: number, open: OpenCall, answer: WireQuotaStreamAnswer): void {
    if (this.calls.get(callId) !== open) return;
    this.forget(callId, open);
    this.out.push(answer);
  }

  private forget(callId: number, open: OpenCall): void {
    this.calls.delete(callId);
    if (open.timer !== undefined) clearTimeout(open.timer);
    if (this.endingWhenIdle && this.calls.size === 0) setImmediate(() => this.end(null));
  }

  private write(answers: WireQuotaStreamAnswer[]): void {
    if (this.ended || this.call.cancelled || this.call.writableEnded) return;
    this.call.write({ answers });
  }

  /** Ends the stream: cancels what is open, then closes it with `error`'s status (null = OK). */
  private end(error: SluiceError | null): void {
    if (this.ended) return;
    this.out.flush();
    this.ended = true;
    this.open.delete(this);
    const open = [...this.calls.values()];
    this.calls.clear();
    for (const call of open) {
      if (call.timer !== undefined) clearTimeout(call.timer);
      call.abort.abort(STREAM_ENDED);
    }
    if (this.call.cancelled || this.call.writableEnded) return;
    if (error) this.call.emit("error", toServiceError(error));
    else this.call.end();
  }
}

function methodName(entry: WireQuotaStreamCall): string {
  switch (entry.call) {
    case "requestQuota":
      return "RequestQuota";
    case "releaseQuota":
      return "ReleaseQuota";
    case "renewLeases":
      return "RenewLeases";
    case "watchDynamicSpec":
      return "WatchDynamicSpec";
    default:
      return "QuotaStream";
  }
}

/** An upper bound of an answer's encoded size, for the frame limit. */
function answerSize(answer: WireQuotaStreamAnswer): number {
  const error = answer.error;
  if (error) return 64 + utf8Bound(error.message) + utf8Bound(error.detailsJson) + utf8Bound(error.leader);
  if (answer.dynamicSpecUpdate) return 64 + utf8Bound(answer.dynamicSpecUpdate.dynamicSpecJson);
  return 64;
}
