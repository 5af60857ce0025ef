import { SluiceError } from "@sluice/core";

// docs/design.md §5.3: a QuotaStream holds at most `controller.max_open_calls_per_stream` open calls. The
// controller refuses more with TOO_MANY_CALLS; Sluice's own clients queue past the bound instead.

/** The default of `controller.max_open_calls_per_stream` (the spec's CONTROLLER_DEFAULTS says the same). */
export const DEFAULT_MAX_OPEN_CALLS_PER_STREAM = 4_096;

/** The spec field the bound comes from, named in every TOO_MANY_CALLS. */
export const BOUND_FIELD = "controller.max_open_calls_per_stream";

/** The refusal of a call past the bound, with the figures: open calls, the bound, the field. */
export function tooManyCalls(callId: number, call: string, openCalls: number, maxOpenCalls: number): SluiceError {
  return new SluiceError(
    "TOO_MANY_CALLS",
    `QuotaStream: call ${callId} (${call}) refused: the stream already has ${openCalls} open calls, the most ${BOUND_FIELD} allows (${maxOpenCalls}); ` +
      "send another once an open call is answered (or open another stream)",
    { method: "QuotaStream", callId, openCalls, maxOpenCalls, field: BOUND_FIELD },
  );
}
