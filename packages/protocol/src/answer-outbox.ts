import { FrameBatcher, utf8Bound } from "./frame-batcher.ts";
import type { WireQuotaStreamAnswer, WireQuotaStreamServerFrame } from "./proto-definition.ts";

/** The writable half of a QuotaStream as the server sees it (grpc-js's ServerDuplexStream). */
export interface AnswerSink {
  write(frame: WireQuotaStreamServerFrame, callback: (error?: Error | null) => void): boolean;
  once(event: "drain", listener: () => void): unknown;
  readonly cancelled: boolean;
  readonly writableEnded: boolean;
}

/**
 * Unsent answer bytes (counted as answerSize's upper bound) past which a stream counts as blocked:
 * a client that reads nothing holds at most about this much encoded in the controller, whatever it sends.
 */
export const MAX_UNSENT_ANSWER_BYTES = 1 << 20;

/**
 * The answers of one QuotaStream on their way out, honouring the stream's write backpressure. A
 * frame is written while the stream keeps up; once `write()` returns false or more than
 * MAX_UNSENT_ANSWER_BYTES wait in the transport, the stream is blocked: answers are held here
 * (unencoded, so the whole spec of a watch's update is one shared string, not a copy per call) until
 * 'drain' and the transport's callbacks say the client read, and `onBlocked`/`onUnblocked` tell the
 * stream to stop and restart reading calls. While blocked, a watch keeps only its newest update.
 */
export class AnswerOutbox {
  private readonly batcher: FrameBatcher<WireQuotaStreamAnswer>;
  private held: WireQuotaStreamAnswer[] = [];
  /** callId → index in `held` of that watch's held update, so a newer one replaces it. */
  private readonly heldUpdates = new Map<number, number>();
  private unsentBytes = 0;
  private awaitingDrain = false;
  private blockedNow = false;
  private closed = false;

  constructor(
    private readonly sink: AnswerSink,
    private readonly sizeOf: (answer: WireQuotaStreamAnswer) => number,
    private readonly onBlocked: () => void,
    private readonly onUnblocked: () => void,
  ) {
    this.batcher = new FrameBatcher((answers) => this.send(answers), sizeOf);
  }

  /** True while the client is not reading: the stream should read no more calls. */
  get blocked(): boolean {
    return this.blockedNow;
  }

  /** Answers held because the stream is blocked (for tests and figures). */
  get heldCount(): number {
    return this.held.length;
  }

  push(answer: WireQuotaStreamAnswer): void {
    if (this.closed) return;
    if (this.blockedNow) this.hold(answer);
    else this.batcher.push(answer);
  }

  /** Sends what this turn queued now (the stream is ending). */
  flush(): void {
    this.batcher.flush();
  }

  /** Drops everything not yet handed to the transport (the stream ended). */
  close(): void {
    this.closed = true;
    this.batcher.discard();
    this.held = [];
    this.heldUpdates.clear();
  }

  private send(answers: WireQuotaStreamAnswer[]): void {
    if (this.closed) return;
    if (this.blockedNow) {
      for (const answer of answers) this.hold(answer);
      return;
    }
    this.write(answers);
  }

  private write(answers: WireQuotaStreamAnswer[]): void {
    if (this.sink.cancelled || this.sink.writableEnded) return;
    let bytes = 0;
    for (const answer of answers) bytes += this.sizeOf(answer);
    this.unsentBytes += bytes;
    const more = this.sink.write({ answers }, () => {
      this.unsentBytes -= bytes;
      this.maybeUnblock();
    });
    if (!more && !this.awaitingDrain) {
      this.awaitingDrain = true;
      this.sink.once("drain", () => {
        this.awaitingDrain = false;
        this.maybeUnblock();
      });
    }
    if (!this.blockedNow && (this.awaitingDrain || this.unsentBytes > MAX_UNSENT_ANSWER_BYTES)) {
      this.blockedNow = true;
      this.onBlocked();
    }
  }

  private hold(answer: WireQuotaStreamAnswer): void {
    if (answer.dynamicSpecUpdate) {
      const at = this.heldUpdates.get(answer.callId);
      if (at !== undefined) {
        this.held[at] = answer;
        return;
      }
      this.heldUpdates.set(answer.callId, this.held.length);
    } else if (this.heldUpdates.has(answer.callId)) {
      // The watch ended (an error): its update, if still held, goes first, as it would have.
      this.heldUpdates.delete(answer.callId);
    }
    this.held.push(answer);
  }

  /** Sends the held answers, frame by frame, for as long as the client keeps reading. */
  private maybeUnblock(): void {
    if (this.closed || !this.blockedNow || this.awaitingDrain || this.unsentBytes > MAX_UNSENT_ANSWER_BYTES / 2) return;
    this.blockedNow = false;
    const held = this.held;
    this.held = [];
    this.heldUpdates.clear();
    let at = 0;
    while (at < held.length && !this.blockedNow) {
      const frame: WireQuotaStreamAnswer[] = [];
      let bytes = 0;
      while (at < held.length && frame.length < FRAME_ANSWERS && bytes < FRAME_BYTES) {
        const answer = held[at++] as WireQuotaStreamAnswer;
        bytes += this.sizeOf(answer);
        frame.push(answer);
      }
      this.write(frame);
    }
    // Blocked again part-way: the rest waits, in order, ahead of anything answered later.
    for (; at < held.length; at++) this.hold(held[at] as WireQuotaStreamAnswer);
    if (!this.blockedNow) this.onUnblocked();
  }
}

const FRAME_ANSWERS = 4_096;
const FRAME_BYTES = 1 << 20;

/** An upper bound of an answer's encoded size, for the frame limit. */
export function answerSize(answer: WireQuotaStreamAnswer): number {
  const error = answer.error;
  if (error) return 64 + utf8Bound(error.message) + utf8Bound(error.detailsJson) + utf8Bound(error.leader);
  if (answer.dynamicSpecUpdate) return 64 + utf8Bound(answer.dynamicSpecUpdate.dynamicSpecJson);
  return 64;
}
