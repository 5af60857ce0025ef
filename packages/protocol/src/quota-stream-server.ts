import { status as GrpcStatus, type Metadata, type ServerDuplexStream } from "@grpc/grpc-js";
import { SluiceError, systemClock } from "@sluice/core";
import { AUTHORIZATION_METADATA_KEY, fromGrpcMetadata } from "./call-metadata.ts";
import { deadlineAnswer, streamCallDeadline } from "./call-deadline.ts";
import { toServiceError } from "./error-mapping.ts";
import { AnswerOutbox, answerSize } from "./answer-outbox.ts";
import { DEFAULT_MAX_OPEN_CALLS_PER_STREAM, tooManyCalls } from "./quota-stream-limits.ts";
import { fromGrpcDeadline } from "./grpc-deadline.ts";
import type {
  WireQuotaStreamAnswer,
  WireQuotaStreamCall,
  WireQuotaStreamClientFrame,
  WireQuotaStreamServerFrame,
  WireRequestQuotaRequest,
} from "./proto-definition.ts";
import { streamErrorOfStatus, toStreamError } from "./quota-stream-errors.ts";
import {
  releaseQuotaCallOf,
  RENEW_LEASES_UNIMPLEMENTED,
  renewLeasesCallOf,
  requestQuotaCallOf,
  type CallMetadata,
  type QuotaServiceHandler,
  type RequestQuotaResult,
} from "./quota-service.ts";
import { UndecodableRequest } from "./request-decoding.ts";
import { StreamCall } from "./stream-call.ts";
import { StreamCallDeadlines } from "./stream-call-deadlines.ts";
import { toUint64 } from "./uint64.ts";
import { wireRequestQuotaResponseOf } from "./wire-answers.ts";

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
export function quotaStreamMethod(
  handler: QuotaServiceHandler,
  authorize: Authorize,
  open: OpenQuotaStreams,
  maxOpenCalls = DEFAULT_MAX_OPEN_CALLS_PER_STREAM,
): (call: Duplex) => void {
  return (call) => {
    const refusal = authorize(call.metadata.get(AUTHORIZATION_METADATA_KEY)[0]);
    if (refusal) {
      call.emit("error", toServiceError(refusal));
      return;
    }
    new ServedQuotaStream(call, handler, open, maxOpenCalls);
  };
}

/** Reason of the signal of every call a stream's end cancels (one value: nobody reads it per call). */
const STREAM_ENDED = new Error("the client ended the quota stream or its connection dropped");
const CALL_CANCELLED = new Error("the client cancelled the call");
const DEADLINE_PASSED = new Error("the call's deadline passed");

/**
 * At most this many calls of one stream start in one turn of the event loop; the rest start in the
 * next turns, each after the answers of the turn before have been written and the other streams'
 * frames read. After a stall (a GC pause, the process descheduled) a stream's frames arrive in one
 * read; without the bound every call of the backlog would start before the first answer left, and
 * the oldest calls, already the latest, would wait for the newest (docs/internals/quota-stream.md).
 */
export const CALLS_PER_TURN = 256;
/** Past this many calls waiting to start, the stream stops reading until they have started. */
const BACKLOG_PAUSE_CALLS = 16 * CALLS_PER_TURN;

class ServedQuotaStream {
  private readonly calls = new Map<number, StreamCall>();
  private readonly out: AnswerOutbox;
  private readonly deadlines: StreamCallDeadlines<StreamCall>;
  private readonly readMetadata = () => this.metadata;
  private readonly streamDeadlineAt: number | null;
  private streamMetadata: CallMetadata | undefined;
  private ended = false;
  private endingWhenIdle = false;
  /** Calls received but not started yet (past this turn's CALLS_PER_TURN), in arrival order. */
  private backlog: WireQuotaStreamCall[] = [];
  private backlogReceivedAt: number[] = [];
  private backlogHead = 0;
  private startedThisTurn = 0;
  private turnEndScheduled = false;

  constructor(
    private readonly call: Duplex,
    private readonly handler: QuotaServiceHandler,
    private readonly open: OpenQuotaStreams,
    private readonly maxOpenCalls: number,
  ) {
    // A client that reads no answers stops being read: what it costs is bounded by its open calls.
    this.out = new AnswerOutbox(
      call,
      answerSize,
      () => this.updateReading(),
      () => this.startBacklog(),
    );
    this.deadlines = new StreamCallDeadlines<StreamCall>(
      (callId, open) => this.calls.get(callId) === open,
      (callId, open, method, at) => {
        // The handler usually answers QUOTA_TIMEOUT itself first, with more to say; this is the
        // guarantee that a call is answered at its deadline whatever the handler does.
        this.finish(callId, open, { callId, error: toStreamError(deadlineAnswer(method, at)) });
        open.cancel(DEADLINE_PASSED);
      },
      () => this.calls.size,
    );
    this.streamDeadlineAt = fromGrpcDeadline(call.getDeadline());
    open.add(this);
    call.on("data", (frame: WireQuotaStreamClientFrame | UndecodableRequest) => this.receive(frame));
    // The client half-closed, cancelled, or the connection dropped: every call still open is
    // cancelled, as a cancelled unary call would be (its quota is refunded).
    call.on("end", () => this.end(null));
    call.on("cancelled", () => this.end(null));
    call.on("error", () => this.end(null));
  }

  /** The stream's own metadata, as plain strings (the token left out), read once. */
  get metadata(): CallMetadata {
    this.streamMetadata ??= fromGrpcMetadata(this.call.metadata as Metadata);
    return this.streamMetadata;
  }

  /** Ends the stream (OK) once no call is open; at once when none is. */
  endWhenIdle(): void {
    this.endingWhenIdle = true;
    if (this.idle) this.end(null);
  }

  /** No call open and none waiting to start. */
  private get idle(): boolean {
    return this.calls.size === 0 && this.backlogHead === this.backlog.length;
  }

  private receive(frame: WireQuotaStreamClientFrame | UndecodableRequest): void {
    if (this.ended) return;
    if (frame instanceof UndecodableRequest) {
      this.end(frame.error);
      return;
    }
    const receivedAt = systemClock.now();
    const calls = frame.calls;
    if (this.backlogHead === this.backlog.length && this.startedThisTurn + calls.length <= CALLS_PER_TURN && !this.out.blocked) {
      this.startedThisTurn += calls.length;
      this.scheduleTurnEnd();
      for (const entry of calls) this.start(entry, receivedAt);
      return;
    }
    for (const entry of calls) {
      this.backlog.push(entry);
      this.backlogReceivedAt.push(receivedAt);
    }
    this.updateReading();
    this.startBacklog();
  }

  /**
   * A client outrunning the controller, or not reading its answers, is held back by HTTP/2 flow
   * control instead of piling frames (or answers) up here.
   */
  private updateReading(): void {
    if (this.ended) return;
    const hold = this.out.blocked || this.backlog.length - this.backlogHead > BACKLOG_PAUSE_CALLS;
    if (hold && !this.call.isPaused()) this.call.pause();
    else if (!hold && this.call.isPaused()) this.call.resume();
  }

  /** Starts what this turn's bound leaves room for, oldest first; the rest waits for a later turn. */
  private startBacklog(): void {
    while (!this.ended && !this.out.blocked && this.startedThisTurn < CALLS_PER_TURN && this.backlogHead < this.backlog.length) {
      const at = this.backlogHead++;
      this.startedThisTurn += 1;
      this.start(this.backlog[at] as WireQuotaStreamCall, this.backlogReceivedAt[at] as number);
    }
    if (this.backlogHead === this.backlog.length) {
      this.backlog = [];
      this.backlogReceivedAt = [];
      this.backlogHead = 0;
      // Calls refused at their start are answered without being open: nothing else would notice idleness.
      if (this.endingWhenIdle && this.calls.size === 0) setImmediate(() => this.end(null));
    }
    this.updateReading();
    this.scheduleTurnEnd();
  }

  /**
   * Resets the per-turn count in the next turn. Two hops: the first immediate runs in this turn's
   * check phase, before the answer frame's flush (queued later, when the first answer settles);
   * the second runs in the next turn's, after its poll phase has read the frames that arrived.
   */
  private scheduleTurnEnd(): void {
    if (this.turnEndScheduled) return;
    this.turnEndScheduled = true;
    setImmediate(() =>
      setImmediate(() => {
        this.turnEndScheduled = false;
        this.startedThisTurn = 0;
        if (this.backlogHead < this.backlog.length) this.startBacklog();
      }),
    );
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
    const deadlineAt = streamCallDeadline(entry.timeoutMs, this.streamDeadlineAt, receivedAt);
    const own = hasEntries(entry.metadata) ? entry.metadata : null;
    const open = new StreamCall(callId, deadlineAt, own, this.readMetadata);
    if (entry.requestQuota && this.handler.requestQuotaNow && this.answeredAtOnce(entry.requestQuota, callId, open)) return;
    this.calls.set(callId, open);
    if (deadlineAt !== null) this.deadlines.add(deadlineAt, callId, open, methodName(entry));
    // Whatever the handler does — throw synchronously, reject, return garbage — the call gets one
    // answer and the stream keeps serving the others.
    try {
      this.run(entry, callId, open);
    } catch (error) {
      this.failed(callId, open, error);
    }
  }

  /**
   * A RequestQuota the handler settles at once is answered in this turn's frame without ever being
   * open (no entry, deadline or reaction: nothing could cancel it); false when the handler returned a
   * promise, which is then answered as run() answers one. Whatever the handler throws is its answer.
   */
  private answeredAtOnce(request: WireRequestQuotaRequest, callId: number, open: StreamCall): boolean {
    let settled: RequestQuotaResult | Promise<RequestQuotaResult>;
    try {
      settled = (this.handler.requestQuotaNow as NonNullable<QuotaServiceHandler["requestQuotaNow"]>)(requestQuotaCallOf(request), open);
    } catch (error) {
      this.out.push({ callId, error: toStreamError(error ?? new Error("the handler threw without a reason")) });
      return true;
    }
    if (!(settled instanceof Promise)) {
      this.out.push({ callId, requestQuota: wireRequestQuotaResponseOf(settled) });
      return true;
    }
    this.calls.set(callId, open);
    if (open.deadlineAt !== null) this.deadlines.add(open.deadlineAt, callId, open, "RequestQuota");
    settled.then(
      (result) => this.finish(callId, open, { callId, requestQuota: wireRequestQuotaResponseOf(result) }),
      (error: unknown) => this.failed(callId, open, error),
    );
    return true;
  }

  /**
   * Starts the handler's work for one call and answers it when it settles; may throw. One reaction
   * per call on the handler's promise: a waiting call keeps nothing more of the transport's.
   */
  private run(entry: WireQuotaStreamCall, callId: number, open: StreamCall): void {
    const context = open;
    const handler = this.handler;
    // Reactions written inline, never as named constants: a named arrow function is given its name
    // with defineProperty by the TypeScript loader (esbuild's keepNames), which turns it into a
    // dictionary-mode object of ~300 bytes — per waiting call (a heap snapshot of group 8 found it).
    if (entry.requestQuota) {
      handler.requestQuota(requestQuotaCallOf(entry.requestQuota), context).then(
        (result) => this.finish(callId, open, { callId, requestQuota: wireRequestQuotaResponseOf(result) }),
        (error: unknown) => this.failed(callId, open, error),
      );
      return;
    }
    if (entry.releaseQuota) {
      handler.releaseQuota(releaseQuotaCallOf(entry.releaseQuota), context).then(
        () => this.finish(callId, open, { callId, releaseQuota: {} }),
        (error: unknown) => this.failed(callId, open, error),
      );
      return;
    }
    if (entry.renewLeases) {
      if (!handler.renewLeases) throw new SluiceError("CONTROLLER_UNAVAILABLE", RENEW_LEASES_UNIMPLEMENTED);
      handler.renewLeases(renewLeasesCallOf(entry.renewLeases), context).then(
        (result) => this.finish(callId, open, { callId, renewLeases: { held: result.held } }),
        (error: unknown) => this.failed(callId, open, error),
      );
      return;
    }
    // refusal() let nothing else through: a watch.
    this.watch(entry.watchDynamicSpec?.clientId ?? "", callId, open, context).then(
      (ended) => {
        if (ended) this.finish(callId, open, ended);
      },
      (error: unknown) => this.failed(callId, open, error),
    );
  }

  private async watch(clientId: string, callId: number, open: StreamCall, context: StreamCall): Promise<WireQuotaStreamAnswer | undefined> {
    const ended = this.handler.watchDynamicSpec(
      clientId,
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
    if (this.calls.size >= this.maxOpenCalls && !this.calls.has(callId)) return tooManyCalls(callId, entry.call, this.calls.size, this.maxOpenCalls);
    if (this.calls.has(callId)) {
      return new SluiceError(
        "INVALID_REQUEST",
        `QuotaStream: call_id ${callId} is already open on this stream (${entry.call}); choose an id unique among the stream's open calls`,
        { method: "QuotaStream", callId },
      );
    }
    return null;
  }

  private cancel(callId: number): void {
    const open = this.calls.get(callId);
    if (!open) return; // answered already: the cancel crossed the answer on the wire
    this.forget(callId);
    open.cancel(CALL_CANCELLED);
  }

  private failed(callId: number, open: StreamCall, error: unknown): void {
    this.finish(callId, open, { callId, error: toStreamError(error ?? new Error("the handler rejected without a reason")) });
  }

  /** Sends `answer` if the call is still open (the first answer wins: handler, deadline or cancel). */
  private finish(callId: number, open: StreamCall, answer: WireQuotaStreamAnswer): void {
    if (this.calls.get(callId) !== open) return;
    this.forget(callId);
    this.out.push(answer);
  }

  private forget(callId: number): void {
    this.calls.delete(callId);
    if (this.endingWhenIdle && this.idle) setImmediate(() => this.end(null));
  }

  /** Ends the stream: cancels what is open, then closes it with `error`'s status (null = OK). */
  private end(error: SluiceError | null): void {
    if (this.ended) return;
    this.out.flush();
    this.out.close();
    this.ended = true;
    this.open.delete(this);
    this.deadlines.clear();
    // Calls not started yet were never open: the client fails them with the stream.
    this.backlog = [];
    this.backlogReceivedAt = [];
    this.backlogHead = 0;
    const open = [...this.calls.values()];
    this.calls.clear();
    for (const call of open) call.cancel(STREAM_ENDED);
    if (this.call.cancelled || this.call.writableEnded) return;
    if (error) this.call.emit("error", toServiceError(error));
    else this.call.end();
  }
}

/** Whether a call carries metadata of its own (without Object.keys' array per call). */
function hasEntries(metadata: Record<string, string>): boolean {
  for (const _ in metadata) return true;
  return false;
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
