/**
 * What a QuotaBucket reports about itself: its snapshot (metrics, status pages, persisted state) and
 * its memory figures. Built from the bucket's parts here so that the bucket holds only its state machine.
 */
import type { ClassQueues } from "./class-queue.ts";
import { effectiveLimitOf, REQUEST_IDS_PER_QUEUE_SLOT, type QuotaBucketConfig } from "./quota-bucket-config.ts";
import type { QuotaBucketCounters, QuotaBucketMemory, QuotaBucketSnapshot } from "./quota-bucket-snapshot.ts";
import type { UnitSource } from "./unit-source.ts";
import type { WaitHistogram } from "./wait-histogram.ts";

/** The parts of a bucket its snapshot is made of. */
export interface QuotaBucketParts {
  readonly id: string;
  readonly config: QuotaBucketConfig;
  readonly tokens: UnitSource;
  readonly classes: ClassQueues;
  readonly pendingRequests: number;
  readonly detachedRequests: number;
  readonly counters: QuotaBucketCounters;
  readonly waitTime: WaitHistogram;
}

export function quotaBucketSnapshotOf(parts: QuotaBucketParts, now: number): QuotaBucketSnapshot {
  const { config, tokens } = parts;
  const limit = effectiveLimitOf(config);
  const classes = parts.classes.snapshots(now);
  return {
    id: parts.id,
    limit,
    periodMs: config.periodMs,
    capacity: limit === null ? null : tokens.capacity,
    balance: limit === null ? null : tokens.balanceAt(now),
    useClassWeightsAsLimit: config.useClassWeightsAsLimit,
    maxGrantAmount: config.maxGrantAmount,
    maxQueueSize: config.maxQueueSize,
    pendingRequests: parts.pendingRequests,
    pendingAmount: classes.reduce((sum, c) => sum + c.pendingAmount, 0),
    detachedRequests: parts.detachedRequests,
    counters: { ...parts.counters },
    waitTime: parts.waitTime.view(now),
    classes,
    kind: tokens.kind,
    inUse: tokens.inUse,
  };
}

/** The figures of QuotaBucketMemory, from the sizes of what the bucket holds. */
export function quotaBucketMemoryOf(
  held: {
    readonly requests: number;
    readonly queueEntries: number;
    readonly timers: number;
    readonly rememberedRequestIds: number;
    readonly forgottenEarlyRequestIds: number;
  },
  config: QuotaBucketConfig,
): QuotaBucketMemory {
  return { ...held, maxRequestIds: config.maxQueueSize * REQUEST_IDS_PER_QUEUE_SLOT };
}
