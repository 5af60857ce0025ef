/** Told once when the waiting call it listens to ends early (cancelled, past its deadline, its connection gone). */
export interface CancelListener {
  cancelled(reason: unknown): void;
}

/**
 * The cancellation of one waiting call, with one listener and no EventTarget: what a transport that
 * holds many waiting calls (QuotaStream) offers instead of an AbortSignal per call. On Node 20 an
 * AbortController with one listener costs about a kilobyte, which a hundred thousand waiting calls
 * multiply.
 */
export interface Cancellation {
  readonly isCancelled: boolean;
  /** What it was cancelled with (undefined while it is not). */
  readonly cancelReason: unknown;
  /** Sets the one listener, replacing an earlier one; null removes it. Never called after it fired. */
  onCancel(listener: CancelListener | null): void;
}
