import { SluiceError } from "./sluice-error.ts";

/** The CANCELLED error a waiter gets when its AbortSignal fires; the signal's reason is the cause. */
export function cancelledError(signal: AbortSignal, what: string): SluiceError {
  return cancelledErrorOf(signal.reason, what);
}

/** The CANCELLED error of a call cancelled with `reason` (an AbortSignal's, or a Cancellation's). */
export function cancelledErrorOf(reason: unknown, what: string): SluiceError {
  const why = reason instanceof Error ? reason.message : reason === undefined ? "aborted" : String(reason);
  return new SluiceError("CANCELLED", `${what} was cancelled by the caller (${why}); quota it held was returned`, {}, { cause: reason });
}

/** Any thrown value as a SluiceError, keeping SluiceErrors as they are. */
export function asSluiceError(error: unknown, fallback: (message: string) => SluiceError): SluiceError {
  if (error instanceof SluiceError) return error;
  return fallback(error instanceof Error ? error.message : String(error));
}
