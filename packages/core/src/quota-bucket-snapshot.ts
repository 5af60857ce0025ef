import type { WaitHistogramView } from "./wait-histogram.ts";

/** Monotonic counters of one QuotaBucket, exported as metrics. */
export interface QuotaBucketCounters {
  /** Total granted (the reference's `value`). */
  granted: number;
  released: number;
  refunded: number;
  classlessRequests: number;
  unknownClassRequests: number;
  refusedQueueFull: number;
  refusedInvalidAmount: number;
  timedOut: number;
  cancelled: number;
  joined: number;
  reattached: number;
  replayed: number;
}

export function newQuotaBucketCounters(): QuotaBucketCounters {
  return {
    granted: 0,
    released: 0,
    refunded: 0,
    classlessRequests: 0,
    unknownClassRequests: 0,
    refusedQueueFull: 0,
    refusedInvalidAmount: 0,
    timedOut: 0,
    cancelled: 0,
    joined: 0,
    reattached: 0,
    replayed: 0,
  };
}

export interface QuotaClassSnapshot {
  readonly id: string;
  readonly weight: number;
  readonly accepting: boolean;
  readonly active: boolean;
  readonly virtualTime: number;
  readonly pendingRequests: number;
  readonly pendingAmount: number;
  readonly granted: number;
  readonly refunded: number;
  readonly released: number;
  readonly waitTime: WaitHistogramView;
}

export interface QuotaBucketSnapshot {
  readonly id: string;
  /** The rate in force (units/s), null when unlimited. */
  readonly limit: number | null;
  readonly periodMs: number;
  readonly capacity: number | null;
  readonly balance: number | null;
  readonly useClassWeightsAsLimit: boolean;
  readonly maxGrantAmount: number | null;
  readonly maxQueueSize: number;
  readonly pendingRequests: number;
  readonly pendingAmount: number;
  readonly detachedRequests: number;
  readonly counters: Readonly<QuotaBucketCounters>;
  /** Enqueue to final grant. */
  readonly waitTime: WaitHistogramView;
  readonly classes: readonly QuotaClassSnapshot[];
  /** Absent in snapshots written before concurrency throttlers existed: read as "rate". */
  readonly kind?: "rate" | "concurrency";
  /** Units held now (concurrency throttlers); null for a rate throttler. */
  readonly inUse?: number | null;
}

/** What a bucket holds in memory, in objects: bounded by its live requests and remembered ids. */
export interface QuotaBucketMemory {
  /** Requests waiting or detached. */
  readonly requests: number;
  /** Entries the class queues hold, including ones that stopped waiting and are not yet dropped. */
  readonly queueEntries: number;
  /** Deadline and grace timers, including stale ones not yet dropped. */
  readonly timers: number;
  /** Granted request ids remembered for the grace, so that a retry is answered and not granted twice. */
  readonly rememberedRequestIds: number;
  /**
   * The most remembered ids: past it the oldest are forgotten before their grace ends (a retry of
   * one is then granted again); new requests are never refused for it.
   */
  readonly maxRequestIds: number;
  /** Granted ids forgotten before their grace ended, to stay within `maxRequestIds` (since the start). */
  readonly forgottenEarlyRequestIds: number;
}
