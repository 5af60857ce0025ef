import { SluiceError } from "@sluice/core";

/**
 * The refusals of a leader whose write to the state topic failed (docs/design.md §5.2). They are retriable
 * (CONTROLLER_UNAVAILABLE) and say what the caller should resend, since what is not persisted is
 * unknown to a successor.
 */

/**
 * A reconfiguration whose record did not reach the state topic: it was not put in force anywhere,
 * and `inForce` still is. Sent again to this leader it becomes `version` again, so no version is
 * skipped.
 */
export function specNotPersistedError(pipeline: string, version: number, inForce: number, cause: unknown): SluiceError {
  return new SluiceError(
    "CONTROLLER_UNAVAILABLE",
    `dynamic_spec version ${version} could not be persisted to "${pipeline}.controller-state" (${describeCause(cause)}), ` +
      `so it was not put in force: version ${inForce} stays; send it again`,
    { version: inForce, refusedVersion: version },
    { cause },
  );
}

/**
 * A reconfiguration persisted as `version` by a controller that stopped leading before it put it in
 * force (`notLeader` says why and who leads): the next leader reads it from the state topic and
 * serves it, so it is not lost; sent again, it becomes the version after it.
 */
export function specPersistedNotAppliedError(pipeline: string, version: number, notLeader: SluiceError): SluiceError {
  return new SluiceError(
    "CONTROLLER_UNAVAILABLE",
    `dynamic_spec version ${version} was persisted to "${pipeline}.controller-state", but this controller stopped leading ` +
      `before it put it in force; the next leader serves it from there (${notLeader.message})`,
    { ...notLeader.details, version },
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
