// What DescribeThrottlers, /metrics and `sluice top` show of a keyed throttler and of one of its keys
// (docs/design.md §11.4); KeyedThrottler works them out.

/** The figures of one keyed throttler for DescribeThrottlers, /metrics and `sluice top`. */
export interface KeyedSnapshot {
  readonly maxKeys: number;
  readonly idleTimeoutMs: number;
  /** Keys remembered now (active and parked). */
  readonly keys: number;
  /** Of those, kept as a bucket (the others are parked as their balance). */
  readonly activeKeys: number;
  /**
   * Requests for a new key refused with TOO_MANY_KEYS since the start: one key asked for again is
   * counted again (counting distinct refused keys would need memory per key refused, the very
   * thing max_keys bounds).
   */
  readonly refusedKeys: number;
  /** Keys forgotten after idle_timeout since the start. */
  readonly forgottenKeys: number;
  /** The top_keys keys by wait time over the last minute, most first. */
  readonly topKeys: readonly { readonly key: string; readonly waitedMs: number; readonly balance: number | null; readonly pendingRequests: number }[];
  /** DescribeThrottlers asked for one key: its own figures. */
  readonly key?: KeyDescription;
}

/** One key of a keyed throttler as DescribeThrottlers answers for it (docs/design.md §11.4). */
export interface KeyDescription {
  readonly key: string;
  /** "active": a bucket of its own; "parked": idle, kept as its balance; "new": not remembered (never asked, or forgotten): it starts full. */
  readonly state: "active" | "parked" | "new";
  /** Whether keyed.overrides has an entry for it. */
  readonly override: boolean;
  /** Its limit (the template's, its override's, or the adaptive loop's); null when unlimited. */
  readonly limit: number | null;
  readonly periodMs: number;
  /** Units it may take now (negative: a debt); null when unlimited. A parked key's includes what accrued since it was parked. */
  readonly balance: number | null;
  readonly capacity: number | null;
  /** Requests of this key waiting, and units held (a concurrency template). */
  readonly pendingRequests: number;
  readonly inUse: number | null;
  /** Milliseconds it waited in all over the last minute (what ranks the top keys). */
  readonly waitedMs: number;
  /** Since its last request, when remembered. */
  readonly idleMs: number | null;
}
