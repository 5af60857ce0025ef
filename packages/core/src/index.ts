export { cancelledError, cancelledErrorOf, asSluiceError } from "./abort.ts";
export type { Cancellation, CancelListener } from "./cancellation.ts";
export { ClassScheduler, DEFAULT_CLASS, type ClassView } from "./class-scheduler.ts";
export { systemClock, type Clock } from "./clock.ts";
export { LocalThrottler, type LocalThrottlerOptions } from "./local-throttler.ts";
export { ManualClock } from "./manual-clock.ts";
export { MinHeap } from "./min-heap.ts";
export {
  CALLER_DELAY_MARGIN_MS,
  SMOOTH_DISPATCH_GUARD_SHARE,
  smoothDispatchGuardMs,
  PaceCursor,
  SMOOTH_RATE_FRACTION,
  SMOOTH_MAX_ANSWER_SPAN_MS,
  maxPacedAnswer,
  paceLeadMs,
  paceReachMs,
  pacedRateOf,
  slotExpiryMs,
  smoothToleranceMs,
  type PaceConfig,
  type PaceSlots,
} from "./pace-cursor.ts";
export { PacedThrottler, type PacedConfig, type PacedQuotaRemote, type PaceSchedule } from "./paced-throttler.ts";
export { SlotSchedule } from "./slot-schedule.ts";
export { DispatchWindow, releaseSharedDispatchWindow, sharedDispatchWindow, sharedDispatchWindowCount } from "./dispatch-window.ts";
export { ControllerClockBound, DRIFT_PER_MS, paceScheduleOf, type ClockSample, type PacedAnswer } from "./controller-clock-bound.ts";
export {
  PrefetchingThrottler,
  type PrefetchConfig,
  type PrefetchStats,
  type QuotaRemote,
} from "./prefetching-throttler.ts";
export {
  MAX_REQUEST_AMOUNT,
  QuotaBucket,
  type Admission,
  type QuotaBucketCounters,
  type QuotaBucketMemory,
  type QuotaBucketSnapshot,
  type QuotaClassSnapshot,
  type QuotaRequest,
  type Settlement,
} from "./quota-bucket.ts";
export {
  GRANT_CHUNKS_PER_POLL,
  QUOTA_BUCKET_DEFAULTS,
  REQUEST_IDS_PER_QUEUE_SLOT,
  effectiveLimitOf,
  quotaBucketConfig,
  type QuotaBucketConfig,
  type ThrottlerKind,
} from "./quota-bucket-config.ts";
export { QuotaBucketDriver, type AcquireRequest, type Grant } from "./quota-bucket-driver.ts";
export { RememberedGrants, type GrantMemory, type RememberedGrant } from "./remembered-grants.ts";
export type { IdHasher } from "./id-hash.ts";
export { RateWindow } from "./rate-window.ts";
export { ERROR_ACTIONS } from "./error-actions.ts";
export {
  ERROR_CODES,
  SLUICE_ERROR_CODES,
  SluiceError,
  isSluiceError,
  isSluiceErrorCode,
  type SluiceErrorCode,
} from "./sluice-error.ts";
export { RESOLVED, type KeyableThrottler, type ThrottleOptions, type Throttler } from "./throttler.ts";
export { TokenBucket, type TokenBucketConfig } from "./token-bucket.ts";
export { RECENT_MAX_WINDOW_MS, WAIT_BUCKETS_MS, WaitHistogram, type WaitHistogramView } from "./wait-histogram.ts";
export { SlidingMax } from "./sliding-max.ts";
export { ConcurrencyUnits } from "./concurrency-units.ts";
export { ownEntry } from "./id-record.ts";
