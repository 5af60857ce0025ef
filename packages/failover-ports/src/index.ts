export type { ControllerElection, ElectionListener, ElectionResult } from "./controller-election.ts";
export {
  EMPTY_CONTROLLER_STATE,
  StateWriterFencedError,
  persistedRecordId,
  type ControllerState,
  type ControllerStateStore,
  type LeaderRecord,
  type PersistedKeyId,
  type PersistedSpec,
  type PersistedThrottler,
  type StateWrite,
} from "./controller-state-store.ts";
export type { PersistedLeases, PersistedRequestId } from "./persisted-leases.ts";
export type { PersistedAdaptive } from "./persisted-adaptive.ts";
export type { AdaptiveLawState } from "./adaptive-law-state.ts";
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
