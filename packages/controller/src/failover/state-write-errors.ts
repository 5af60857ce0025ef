import { SluiceError } from "@sluice/core";

/**
 * The refusals of a leader whose write to the state topic failed (DESIGN §7.4). They are retriable
 * (CONTROLLER_UNAVAILABLE) and say what the caller should resend, since what is not persisted is
 * unknown to a successor.
 */

/** A reconfiguration applied on this leader whose record did not reach the state topic. */
export function specNotPersistedError(pipeline: string, version: number, cause: unknown): SluiceError {
  return new SluiceError(
    "CONTROLLER_UNAVAILABLE",
    `dynamic_spec version ${version} is in force on this leader but could not be persisted to ` +
      `"${pipeline}.controller-state" (${describeCause(cause)}), so a successor would not know it: send it again`,
    { version },
    { cause },
  );
}

/** A grant (`what`, e.g. `the grant of 5 on throttler "rows"`) whose balances did not reach the state topic. */
export function grantNotPersistedError(pipeline: string, what: string, cause: unknown): SluiceError {
  return new SluiceError(
    "CONTROLLER_UNAVAILABLE",
    `${what} could not be persisted to "${pipeline}.controller-state" (${describeCause(cause)}); retry with the same request id`,
    {},
    { cause },
  );
}

/** The message of a failure, for refusals and log lines. */
export function describeCause(error: unknown): string {
  return error instanceof Error ? error.message : String(error);
}
