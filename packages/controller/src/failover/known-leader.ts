import type { LeaderRecord } from "@sluice/failover-ports";
import type { FailoverRole } from "../quota/failover-status.ts";

/**
 * Where a controller sends its callers (docs/design.md §5.2): itself while it leads or takes over, else the
 * leader the state topic last announced. A record of a generation older than the latest election
 * seen may name a controller that is gone, and no hint beats a wrong one, so it gives null then.
 */
export function knownLeader(options: {
  readonly role: FailoverRole;
  readonly self: string;
  readonly announced: LeaderRecord | null;
  readonly generation: number | null;
}): string | null {
  const { role, self, announced, generation } = options;
  if (role === "leader" || role === "taking-over") return self;
  if (announced === null || (generation !== null && announced.generation < generation)) return null;
  return announced.address;
}
