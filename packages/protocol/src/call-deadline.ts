import type { Metadata } from "@grpc/grpc-js";
import { SluiceError } from "@sluice/core";

/**
 * Who ends a call at its deadline. With a plain gRPC deadline the client's own timer fires first
 * (the server's copy of the deadline starts later, when the headers arrive) and the client resets
 * the stream with RST_STREAM. The controller's HTTP/2 layer (nghttp2, as used by Node) allows a
 * connection about 1000 received resets plus 33 per second (rapid-reset mitigation, CVE-2023-44487);
 * beyond that it closes the whole connection with GOAWAY INTERNAL_ERROR, and every other call on it
 * — a long wait of another job included — fails with INTERNAL. A worker whose requests often reach
 * their deadline crossed that line within a second.
 *
 * So the caller's deadline travels in metadata and the server answers at it (QUOTA_TIMEOUT, a clean
 * end of stream the client never resets), while the client's transport deadline is set a grace
 * later: it fires, and resets, only when the controller failed to answer in time.
 */

/** Metadata key: the caller's remaining time in whole ms, relative like grpc-timeout, so clocks need not agree. */
export const CALLER_TIMEOUT_METADATA_KEY = "sluice-timeout-ms";

/**
 * How long after the caller's deadline the client still waits for the controller's answer before
 * giving up on its own (and resetting the stream). Covers transit and event-loop lag on a loaded
 * host; it only lengthens a call whose controller is stuck.
 */
export const DEADLINE_ANSWER_GRACE_MS = 1_000;

/** Client side: carries `deadlineAt` (epoch ms) to the server; returns the transport deadline to give grpc-js. */
export function sendCallerDeadline(metadata: Metadata, deadlineAt: number, now: number): number {
  metadata.set(CALLER_TIMEOUT_METADATA_KEY, String(Math.max(0, Math.ceil(deadlineAt - now))));
  return deadlineAt + DEADLINE_ANSWER_GRACE_MS;
}

/** Largest timeout taken from metadata: grpc-timeout's own maximum (8 digits of hours is more than enough). */
const MAX_CALLER_TIMEOUT_MS = 100_000_000 * 3_600_000;

/**
 * Server side: the deadline a call must be answered by (epoch ms), or null when it has none. The
 * caller's deadline from metadata when it sent one, never later than the transport's own; a value
 * that is not a whole number of ms is ignored (the transport deadline still bounds the call).
 */
export function receivedCallerDeadline(metadata: Metadata, transportDeadlineAt: number | null, receivedAt: number): number | null {
  const [raw] = metadata.get(CALLER_TIMEOUT_METADATA_KEY);
  if (typeof raw !== "string" || !/^\d{1,16}$/.test(raw)) return transportDeadlineAt;
  const timeoutMs = Number(raw);
  if (timeoutMs > MAX_CALLER_TIMEOUT_MS) return transportDeadlineAt;
  const callerDeadlineAt = receivedAt + timeoutMs;
  return transportDeadlineAt === null ? callerDeadlineAt : Math.min(callerDeadlineAt, transportDeadlineAt);
}

/** What the server answers a call still open at its caller's deadline (`path` may be a bare method name). */
export function deadlineAnswer(path: string, deadlineAt: number | null): SluiceError {
  const method = path.slice(path.lastIndexOf("/") + 1) || path;
  const when = deadlineAt === null ? "its deadline" : `its deadline ${new Date(deadlineAt).toISOString()}`;
  return new SluiceError(
    "QUOTA_TIMEOUT",
    `${method} passed ${when} (the caller's own) before the controller answered` +
      (method === "RequestQuota" ? "; a retry with the same request id resumes its place" : "; retry with a longer deadline"),
    { method, deadlineAt },
  );
}

/**
 * Server side, quota stream: a call's `timeout_ms` (0 = none, as the proto says) as the deadline it
 * must be answered by, never later than the stream's own transport deadline (streams rarely have one).
 */
export function streamCallDeadline(timeoutMs: number, streamDeadlineAt: number | null, receivedAt: number): number | null {
  if (!(timeoutMs > 0) || timeoutMs > MAX_CALLER_TIMEOUT_MS) return streamDeadlineAt;
  const callerDeadlineAt = receivedAt + timeoutMs;
  return streamDeadlineAt === null ? callerDeadlineAt : Math.min(callerDeadlineAt, streamDeadlineAt);
}

/** Client side, quota stream: `deadlineAt` as the `timeout_ms` of a call (whole ms, at least 1: 0 would mean none). */
export function streamCallTimeoutMs(deadlineAt: number | undefined, now: number): number {
  if (deadlineAt === undefined) return 0;
  return Math.max(1, Math.ceil(deadlineAt - now));
}
