import { Metadata, status as GrpcStatus, type ServiceError } from "@grpc/grpc-js";
import { cancelledError, isSluiceErrorCode, SluiceError, type SluiceErrorCode } from "@sluice/core";

/**
 * docs/design.md §4.5 on the wire: the gRPC status each Sluice code travels as. `null` marks the codes a
 * client raises itself and no server ever sends. The error reference's table (docs/reference/errors.md) is checked against this
 * and core's ERROR_CODES by a test, so the three cannot drift apart.
 */
export const GRPC_STATUS_BY_CODE = {
  SPEC_INVALID: GrpcStatus.INVALID_ARGUMENT,
  THROTTLER_NOT_DECLARED: null,
  UNKNOWN_THROTTLER: GrpcStatus.NOT_FOUND,
  // NOT_FOUND like UNKNOWN_THROTTLER (the entity is gone); the code in the trailer tells the client
  // that this one is final rather than a controller still starting up.
  THROTTLER_REMOVED: GrpcStatus.NOT_FOUND,
  INVALID_AMOUNT: GrpcStatus.INVALID_ARGUMENT,
  INVALID_REQUEST: GrpcStatus.INVALID_ARGUMENT,
  QUEUE_FULL: GrpcStatus.RESOURCE_EXHAUSTED,
  QUOTA_TIMEOUT: GrpcStatus.DEADLINE_EXCEEDED,
  CONTROLLER_UNAVAILABLE: GrpcStatus.UNAVAILABLE,
  RETRIES_EXHAUSTED: null,
  CANCELLED: GrpcStatus.CANCELLED,
  UNAUTHENTICATED: GrpcStatus.UNAUTHENTICATED,
  // RESOURCE_EXHAUSTED like QUEUE_FULL; not retriable: only an answer to an open call makes room.
  TOO_MANY_CALLS: GrpcStatus.RESOURCE_EXHAUSTED,
  // RESOURCE_EXHAUSTED like QUEUE_FULL; not retriable: the keys in use only make room once idle.
  TOO_MANY_KEYS: GrpcStatus.RESOURCE_EXHAUSTED,
  // The client's own finding from a renewal's answer; no server sends it.
  LEASE_EXPIRED: null,
} as const satisfies Record<SluiceErrorCode, GrpcStatus | null>;

/** Trailer metadata carrying the Sluice code, so a client never has to guess it from the status. */
export const ERROR_CODE_METADATA_KEY = "sluice-error-code";
/** Trailer metadata carrying the error's figures as JSON (amounts, limits, ids), for logs and retries. */
export const ERROR_DETAILS_METADATA_KEY = "sluice-error-details-bin";

/**
 * Trailer metadata of a follower's UNAVAILABLE (docs/design.md §5.2): the leader's "host:port", where the
 * client should send the call instead. Taken from a SluiceError's `details.leader`.
 */
export const LEADER_METADATA_KEY = "sluice-leader";

/** The leader a refusal names (trailer `sluice-leader`, or the figures), if any. */
export function leaderOf(error: unknown): string | null {
  if (!(error instanceof SluiceError)) return null;
  const leader = (error.details as { readonly leader?: unknown } | undefined)?.leader;
  return typeof leader === "string" && leader !== "" ? leader : null;
}

/** `NOT_FOUND` for 5: the names clients and people see in messages. */
export function grpcStatusName(code: number): string {
  return GrpcStatus[code] ?? `status ${code}`;
}

// ───────────────────────────── server side ─────────────────────────────

/**
 * What a handler threw, as the status the server sends. A SluiceError keeps its message and its code
 * travels in metadata; anything else is a bug in the controller, reported as INTERNAL with its
 * message rather than crashing the server or hiding the cause behind "Unknown error".
 */
export function toServiceError(error: unknown): ServiceError {
  const metadata = new Metadata();
  if (error instanceof SluiceError) {
    // Client-only codes should never be thrown by a handler; if one is, it still reaches the
    // client intact (through the metadata) instead of being relabelled.
    const code = GRPC_STATUS_BY_CODE[error.code] ?? GrpcStatus.INTERNAL;
    metadata.set(ERROR_CODE_METADATA_KEY, error.code);
    // A binary entry: figures may hold any Unicode (spec paths, messages), which ASCII metadata cannot.
    const figures = safeJson(error.details);
    if (figures !== null && figures !== "{}" && Buffer.byteLength(figures) <= MAX_STATUS_FIGURES_BYTES) {
      metadata.set(ERROR_DETAILS_METADATA_KEY, Buffer.from(figures, "utf8"));
    }
    // Also outside the figures, so the redirect survives figures too large to send.
    const leader = leaderOf(error);
    if (leader !== null) metadata.set(LEADER_METADATA_KEY, leader);
    return serviceError(code, boundedMessage(error.message), metadata);
  }
  const message = error instanceof Error ? error.message : String(error);
  return serviceError(GrpcStatus.INTERNAL, boundedMessage(`the controller failed while handling the call: ${message}`), metadata);
}

/**
 * A status travels in HTTP/2 trailers, and a client drops the whole connection — every call on it —
 * when they exceed its header limit (somewhere between 70 and 200 KB with grpc-js). A message is cut
 * to this many characters (at most ~24 KB once percent-encoded), and figures larger than this many
 * bytes are left out: the message still says what was wrong.
 */
export const MAX_STATUS_MESSAGE_LENGTH = 4_096;
export const MAX_STATUS_FIGURES_BYTES = 8_192;

function boundedMessage(message: string): string {
  const cut =
    message.length <= MAX_STATUS_MESSAGE_LENGTH
      ? message
      : `${message.slice(0, MAX_STATUS_MESSAGE_LENGTH - 64)}… (${message.length - (MAX_STATUS_MESSAGE_LENGTH - 64)} more characters cut)`;
  // grpc-js percent-encodes the message with encodeURI, which throws on a lone UTF-16 surrogate: the
  // cut above can leave one, and so can a handler echoing a string it was given.
  return cut.replace(LONE_SURROGATE, "\uFFFD");
}

const LONE_SURROGATE = /[\uD800-\uDBFF](?![\uDC00-\uDFFF])|(?<![\uD800-\uDBFF])[\uDC00-\uDFFF]/g;

function serviceError(code: GrpcStatus, details: string, metadata: Metadata): ServiceError {
  return Object.assign(new Error(details), { code, details, metadata });
}

function safeJson(value: unknown): string | null {
  try {
    return JSON.stringify(value) ?? null;
  } catch {
    return null; // a figure that does not serialize (a cycle, a BigInt) is not worth failing the call
  }
}

// ───────────────────────────── client side ─────────────────────────────

/** Where a failed call went, for messages a person can act on. */
export interface CallSite {
  /** The RPC, e.g. "RequestQuota". */
  readonly method: string;
  /** host:port of the controller, or a name such as "in-memory controller". */
  readonly address: string;
  /** The call's own deadline (epoch ms), if it had one. */
  readonly deadlineAt?: number | undefined;
  /** The caller's signal: a CANCELLED status after it aborted is the caller's own cancel. */
  readonly signal?: AbortSignal | undefined;
}

/**
 * Any failure of a client call as a SluiceError. The server's code (metadata) wins and keeps the
 * server's message; without it the status decides: the transport itself failed or gave up.
 */
export function fromGrpcError(error: unknown, site: CallSite): SluiceError {
  if (error instanceof SluiceError) return error;
  const status = statusOf(error);
  const details = detailsOf(error);
  const code = status?.metadata.get(ERROR_CODE_METADATA_KEY)[0];
  if (typeof code === "string" && isSluiceErrorCode(code)) {
    const figures = parseFigures(status?.metadata.get(ERROR_DETAILS_METADATA_KEY)[0]);
    const leader = status?.metadata.get(LEADER_METADATA_KEY)[0];
    const withLeader = typeof leader === "string" && leader !== "" ? { ...figures, leader } : figures;
    return new SluiceError(code, withoutCodePrefix(details, code), withLeader);
  }
  if (site.signal?.aborted) return cancelledError(site.signal, `${site.method} to the controller at ${site.address}`);
  const unreachable = () =>
    new SluiceError(
      "CONTROLLER_UNAVAILABLE",
      `the controller at ${site.address} is unreachable for ${site.method} (${details}); it may be restarting: retry with backoff`,
      { address: site.address, method: site.method },
      { cause: error },
    );
  if (!status) return unreachable();
  switch (status.code) {
    case GrpcStatus.DEADLINE_EXCEEDED:
      return deadlineExceededError(site, details);
    case GrpcStatus.CANCELLED:
      // The caller's own cancel was handled above (its signal aborted). A CANCELLED it did not ask
      // for comes from the other side — a controller cut off in shutdown, a proxy — and must not
      // fail the job as a non-retriable CANCELLED: the request was lost, not abandoned.
      return new SluiceError(
        "CONTROLLER_UNAVAILABLE",
        `${site.method} was cancelled by the controller at ${site.address} or on the way to it (${details}), ` +
          "not by the caller; retry, the controller may be restarting",
        { address: site.address, method: site.method, grpcStatus: "CANCELLED" },
        { cause: error },
      );
    case GrpcStatus.UNAUTHENTICATED:
      // Not from our server (it sends the code in metadata), e.g. from a proxy in front of it; still
      // not worth retrying, so it keeps its own code rather than becoming CONTROLLER_UNAVAILABLE.
      return new SluiceError("UNAUTHENTICATED", `${site.method} to ${site.address} was refused as unauthenticated (${details}); check the controller token`, {
        address: site.address,
        method: site.method,
      });
    case GrpcStatus.UNAVAILABLE:
      return unreachable();
    default:
      return new SluiceError(
        "CONTROLLER_UNAVAILABLE",
        `${site.method} to the controller at ${site.address} failed with ${grpcStatusName(status.code)}: ${details}`,
        { address: site.address, method: site.method, grpcStatus: grpcStatusName(status.code) },
        { cause: error },
      );
  }
}

/** A call made on, or cut short by, a client that was closed: every transport says the same. */
export function clientClosedError(address: string, method: string): SluiceError {
  return new SluiceError("CONTROLLER_UNAVAILABLE", `${method} to the controller at ${address} was not sent or not answered: this client was closed`, {
    address,
    method,
  });
}

/**
 * The client's own deadline passed before an answer came. Both transports produce exactly this, so
 * callers see one QUOTA_TIMEOUT whichever side noticed first.
 */
export function deadlineExceededError(site: CallSite, details?: string): SluiceError {
  const when = site.deadlineAt === undefined ? "its deadline" : `its deadline ${new Date(site.deadlineAt).toISOString()}`;
  return new SluiceError(
    "QUOTA_TIMEOUT",
    `${site.method} to the controller at ${site.address} passed ${when} (the caller's own deadline) before an answer came` +
      `${details ? ` (${details})` : ""}; a retry with the same request id resumes its place`,
    { address: site.address, method: site.method, deadlineAt: site.deadlineAt ?? null },
  );
}

/**
 * A watch stream that the controller ended while the caller still wanted it is, to the caller, a
 * lost connection: it reconnects (the promise of watchDynamicSpec rejects with this).
 */
export function streamEndedStatus(): ServiceError {
  return serviceError(GrpcStatus.UNAVAILABLE, "the controller ended the dynamic_spec watch stream; reconnect to keep watching", new Metadata());
}

interface GrpcStatusLike {
  readonly code: number;
  readonly metadata: Metadata;
}

function statusOf(error: unknown): GrpcStatusLike | undefined {
  if (typeof error !== "object" || error === null) return undefined;
  const { code, metadata } = error as { code?: unknown; metadata?: unknown };
  if (typeof code !== "number") return undefined;
  return { code, metadata: metadata instanceof Metadata ? metadata : new Metadata() };
}

function detailsOf(error: unknown): string {
  if (typeof error === "object" && error !== null) {
    const { details, message } = error as { details?: unknown; message?: unknown };
    if (typeof details === "string" && details !== "") return details;
    if (typeof message === "string") return message;
  }
  return String(error);
}

function withoutCodePrefix(details: string, code: string): string {
  return details.startsWith(`${code}: `) ? details.slice(code.length + 2) : details;
}

function parseFigures(raw: unknown): Record<string, unknown> {
  if (!Buffer.isBuffer(raw)) return {};
  try {
    const parsed: unknown = JSON.parse(raw.toString("utf8"));
    return typeof parsed === "object" && parsed !== null && !Array.isArray(parsed) ? (parsed as Record<string, unknown>) : {};
  } catch {
    return {};
  }
}
