// The shapes a Controller reports: what DescribeThrottlers returns as JSON and the bucket balances
// failover persists. Kept apart from the Controller so that readers of snapshots (metrics, status
// pages, failover) depend on the data, not on the service that produces it.
import type { QuotaBucketSnapshot, QuotaClassSnapshot } from "@sluice/core";
import type { AlignmentGroupSnapshot } from "./alignment/alignment-groups.ts";
import type { AdaptiveSnapshot } from "../adaptive/adaptive-loop.ts";
import type { ConcurrencySnapshot } from "./concurrency/concurrency-leases.ts";
import type { KeyedSnapshot } from "./keyed/keyed-throttler.ts";
import type { FailoverStatus } from "./failover-status.ts";

/** A bucket's balance and the controller-clock time it was read at (what failover persists). */
export interface BucketBalance {
  readonly balance: number;
  readonly atMs: number;
  /** The rate the bucket refills at (units/s) when read; absent where unknown (an older record). */
  readonly limitPerSecond?: number | null;
  /** The bucket's capacity when read. */
  readonly capacity?: number | null;
}

export interface ControllerClassSnapshot extends QuotaClassSnapshot {
  /** Granted units per second over the last 5 s. */
  readonly grantedRate: number;
}

export interface ControllerThrottlerSnapshot extends Omit<QuotaBucketSnapshot, "classes"> {
  /** Granted units per second over the last 5 s. */
  readonly grantedRate: number;
  readonly classes: readonly ControllerClassSnapshot[];
  /** Present when the throttler's limit is set by its adaptive loop (docs/design.md §11.3). */
  readonly adaptive?: AdaptiveSnapshot;
  /** Present for a concurrency throttler (docs/design.md §11.2): its holders and ended leases. */
  readonly concurrency?: ConcurrencySnapshot;
  /** Present for a keyed throttler (docs/design.md §11.4): its keys and top keys; the bucket figures are the template's. */
  readonly keyed?: KeyedSnapshot;
}

/** What DescribeThrottlers returns as JSON. */
export interface ControllerSnapshot {
  readonly version: number;
  /** ISO time of the controller's clock. */
  readonly generatedAt: string;
  readonly throttlers: readonly ControllerThrottlerSnapshot[];
  /** With failover (docs/design.md §5.2): the leadership as this controller sees it. */
  readonly failover?: FailoverStatus;
  /** Watermark alignment groups (docs/design.md §12) that have reported partitions; absent on a follower. */
  readonly alignment?: readonly AlignmentGroupSnapshot[];
}
