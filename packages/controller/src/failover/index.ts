export { FailoverController, type FailoverControllerOptions } from "./failover-controller.ts";
export type { ControllerElection, ElectionListener, ElectionResult } from "./controller-election.ts";
export {
  EMPTY_CONTROLLER_STATE,
  StateWriterFencedError,
  type ControllerState,
  type ControllerStateStore,
  type LeaderRecord,
  type PersistedSpec,
  type PersistedThrottler,
  type StateWrite,
} from "./controller-state-store.ts";
export type { FailoverRole, FailoverStatus } from "./failover-status.ts";
export { LeaderLease } from "./leader-lease.ts";
export { GroupCommit } from "./group-commit.ts";
export { startFailoverController, type StartFailoverControllerOptions, type RunningFailoverController } from "./failover-server.ts";
export {
  PERSISTED_HOLDERS_MAX,
  PERSISTED_HOLDERS_MAX_BYTES,
  PERSISTED_REQUEST_IDS_MAX,
  PERSISTED_REQUEST_IDS_MAX_BYTES,
  PERSISTED_SILENCES_MAX_BYTES,
  STATE_RECORD_MAX_BYTES,
  UNLISTED_HOLDER,
  boundedLeases,
} from "./state-bounds.ts";
