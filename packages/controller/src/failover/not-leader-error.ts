import { SluiceError } from "@sluice/core";
import type { FailoverRole } from "../quota/failover-status.ts";

/**
 * The refusal of a controller that does not serve (docs/design.md §5.2): CONTROLLER_UNAVAILABLE, retriable,
 * with `details.leader` — sent as the trailer `sluice-leader` — when it knows where the caller
 * should go instead.
 */
export function notLeaderError(options: {
  readonly role: FailoverRole;
  readonly self: string;
  readonly pipeline: string;
  readonly leader: string | null;
  /** The group membership it lost and has had no election result since, when that is why no leader is known. */
  readonly lostMembership?: { readonly reason: string; readonly agoMs: number } | null;
}): SluiceError {
  const { role, self, leader } = options;
  const pipeline = JSON.stringify(options.pipeline);
  if (role === "taking-over") {
    return new SluiceError(
      "CONTROLLER_UNAVAILABLE",
      `the controller at ${self} was just elected leader of pipeline ${pipeline} and is reading its state; retry here in a moment`,
      { address: self, leader: self },
    );
  }
  if (leader !== null && leader !== self) {
    return new SluiceError("CONTROLLER_UNAVAILABLE", `the controller at ${self} is a follower of pipeline ${pipeline}; the leader is ${leader}: retry there`, {
      address: self,
      leader,
    });
  }
  const lost = options.lostMembership ?? null;
  const why =
    role === "fenced"
      ? "its leadership lapsed (no heartbeat confirmed within its lease, or its state could not be persisted)"
      : role === "closed"
        ? "it is shutting down"
        : lost !== null
          ? `no leader is known yet: its group membership ended ${(lost.agoMs / 1000).toFixed(1)} s ago (${lost.reason}) and no election has ` +
            "reported since (it rejoins until Kafka answers)"
          : "no leader is known yet (an election is under way; it takes up to the session timeout)";
  return new SluiceError("CONTROLLER_UNAVAILABLE", `the controller at ${self} does not serve pipeline ${pipeline}: ${why}; retry with backoff`, {
    address: self,
  });
}
