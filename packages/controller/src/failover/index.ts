export { FailoverController, type FailoverControllerOptions } from "./failover-controller.ts";
export type { ControllerElection, ElectionListener, ElectionResult } from "./controller-election.ts";
export {
  EMPTY_CONTROLLER_STATE,
  newerRecord,
  type ControllerState,
  type ControllerStateStore,
  type LeaderRecord,
  type PersistedBuckets,
  type PersistedSpec,
} from "./controller-state-store.ts";
export type { FailoverRole, FailoverStatus } from "./failover-status.ts";
export { LeaderLease } from "./leader-lease.ts";
export { GroupCommit } from "./group-commit.ts";
export { startFailoverController, type StartFailoverControllerOptions, type RunningFailoverController } from "./failover-server.ts";
