/**
 * Every refusal in Sluice is a SluiceError: a stable `code` to branch on, whether retrying can help,
 * and a message that names what was wrong, where, and the figures involved.
 * The table is docs/design.md §4.5; the gRPC status of each code lives in @sluice/protocol.
 */
export const ERROR_CODES = {
  SPEC_INVALID: { retriable: false, quotaConsumed: "no", meaning: "the pipeline spec or dynamic_spec is invalid" },
  THROTTLER_NOT_DECLARED: { retriable: false, quotaConsumed: "no", meaning: "the throttler id is not in this computation's dynamic_spec" },
  UNKNOWN_THROTTLER: { retriable: true, quotaConsumed: "no", meaning: "the controller has no throttler by that id (briefly, after a controller restart)" },
  THROTTLER_REMOVED: {
    retriable: false,
    quotaConsumed: "no",
    meaning: "a reconfiguration removed the throttler from dynamic_spec; declare it again to use it",
  },
  INVALID_AMOUNT: { retriable: false, quotaConsumed: "no", meaning: "the amount is negative, not finite or too large" },
  INVALID_REQUEST: {
    retriable: false,
    quotaConsumed: "no",
    meaning: "a field of the request is malformed: an id over the length limit, or a message that does not decode",
  },
  QUEUE_FULL: { retriable: true, quotaConsumed: "no", meaning: "max_queue_size requests already wait on this throttler; retry with backoff" },
  QUOTA_TIMEOUT: { retriable: true, quotaConsumed: "no", meaning: "the deadline passed while queued; a retry with the same request id resumes its place" },
  CONTROLLER_UNAVAILABLE: { retriable: true, quotaConsumed: "no", meaning: "the controller cannot be reached or is shutting down" },
  RETRIES_EXHAUSTED: { retriable: false, quotaConsumed: "no", meaning: "retry_attempts or retry_timeout is spent; the job fails" },
  CANCELLED: { retriable: false, quotaConsumed: "refunded", meaning: "the caller cancelled; quota granted to the request was refunded" },
  UNAUTHENTICATED: { retriable: false, quotaConsumed: "no", meaning: "the caller is not allowed to use this controller" },
  TOO_MANY_CALLS: {
    retriable: false,
    quotaConsumed: "no",
    meaning: "the QuotaStream already holds controller.max_open_calls_per_stream open calls; send more only as open ones are answered",
  },
  TOO_MANY_KEYS: {
    retriable: false,
    quotaConsumed: "no",
    meaning: "the keyed throttler already holds keyed.max_keys live keys; a new key is refused until idle ones are forgotten",
  },
  LEASE_EXPIRED: {
    retriable: false,
    quotaConsumed: "no",
    meaning: "the controller no longer counts this holder's concurrency units (lease_timeout passed without a renewal); the work they admitted is redone",
  },
} as const satisfies Record<string, { retriable: boolean; quotaConsumed: "no" | "refunded"; meaning: string }>;

export type SluiceErrorCode = keyof typeof ERROR_CODES;

export const SLUICE_ERROR_CODES = Object.keys(ERROR_CODES) as SluiceErrorCode[];

export function isSluiceErrorCode(value: string): value is SluiceErrorCode {
  return Object.hasOwn(ERROR_CODES, value);
}

export class SluiceError extends Error {
  override readonly name = "SluiceError";
  readonly code: SluiceErrorCode;
  readonly retriable: boolean;
  /** The figures behind the message (amounts, limits, ids), for logs and tests. */
  readonly details: Readonly<Record<string, unknown>>;

  /** `text` is the sentence after the code: `QUEUE_FULL: <text>`. */
  constructor(code: SluiceErrorCode, text: string, details: Record<string, unknown> = {}, options?: { cause?: unknown }) {
    super(`${code}: ${text}`, options);
    this.code = code;
    this.retriable = ERROR_CODES[code].retriable;
    this.details = details;
  }

  /** The message without its `CODE: ` prefix. */
  get text(): string {
    return this.message.slice(this.code.length + 2);
  }
}

export function isSluiceError(error: unknown, code?: SluiceErrorCode): error is SluiceError {
  return error instanceof SluiceError && (code === undefined || error.code === code);
}
