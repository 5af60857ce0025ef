// What a failover leader persists of its adaptive loops (docs/design.md §11.3, §5.2), in the `buckets` record
// beside the balances and leases, so a successor goes on from the limit its predecessor had reached
// instead of starting over at initial_limit (a slow start that starves the protected system for
// a minute, or a burst if initial_limit is high). Records written before this field lack it: the
// loops then start at initial_limit, as before.

import type { AdaptiveLawState } from "./adaptive-law-state.ts";

export interface PersistedAdaptive {
  /** The limit the bucket ran at (differs from law.limit only under dry_run). */
  readonly limitInForce: number;
  /**
   * The law's state: the suggested limit, failed readings in a row (a successor of a leader that
   * already lost Prometheus twice falls back on the next failure), and the slow-start and near-band
   * memory of the last decision.
   */
  readonly law: AdaptiveLawState;
  /** Clock time of the last decision, epoch ms; null before the first. */
  readonly decidedAtMs: number | null;
}
