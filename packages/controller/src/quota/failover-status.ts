/** Where a controller of a failover group stands (docs/design.md §5.2): shown by `sluice top`, the dashboard and /metrics. */
export type FailoverRole = "starting" | "taking-over" | "leader" | "follower" | "fenced" | "closed";

export interface FailoverStatus {
  readonly role: FailoverRole;
  /** This controller's address (what its clients are told to use). */
  readonly address: string;
  /** The leader's address as this controller knows it; null while none is known. */
  readonly leader: string | null;
  /** ISO time the current leadership began (this controller's own when it leads). */
  readonly leaderSince: string | null;
  /** Group generation of the latest election seen. */
  readonly generation: number | null;
  /** Elections (rebalances of the group) this controller has seen since it started. */
  readonly elections: number;
  /** Times this controller took the leadership on. */
  readonly leaderships: number;
  /** ISO time of the newest state record read or written (bucket balances); null when none yet. */
  readonly stateWrittenAt: string | null;
  /** Milliseconds since then. */
  readonly stateAgeMs: number | null;
  /** Milliseconds the leader's lease still runs without a confirmed heartbeat; null when not leading. */
  readonly leaseRemainingMs: number | null;
  /** Writes to the state topic that failed since this controller started (`sluice_controller_state_write_errors_total`). */
  readonly stateWriteErrors: number;
  /** While leading: why the latest state write failed, until one succeeds again (then null); /healthz answers 503 meanwhile. */
  readonly stateWriteFailure: string | null;
}
