// The election port of controller failover (docs/design.md §2, §5.2): `packages/kafka` implements it with
// Kafka's group membership (consumer group `<pipeline>.controller`), so the controller needs no
// consensus of its own and never imports kafkajs.

/** The outcome of one round of the group protocol, as this member sees it. */
export interface ElectionResult {
  /**
   * The group generation the result belongs to. It restarts at 1 when Kafka deletes the empty group,
   * so it orders nothing persisted (the state's writer is fenced by Kafka instead, docs/design.md §5.3).
   */
  readonly generation: number;
  /** This member's id in the group. */
  readonly memberId: string;
  /** Whether the assignment made this member the leader. */
  readonly leading: boolean;
  /**
   * When the request that completed the round was SENT, on the controller's clock (never a
   * client library's own wall-clock stamp: one time base, docs/design.md §5.3): the coordinator cannot have
   * expired this member before then plus the session timeout. The send time, not the answer's, so a
   * process paused while the answer was on its way does not count the pause as confirmed.
   */
  readonly confirmedAtMs: number;
}

export interface ElectionListener {
  /**
   * Asked before each round: the generation this member leads and serves in now, or null. A member
   * that claims keeps the leadership when others join; the highest generation wins between claims,
   * so a paused leader that comes back (its lease lapsed, so it claims nothing) cannot take it back.
   */
  claim(): { readonly generation: number } | null;
  /** A rebalance finished (join + sync): the leadership for `result.generation` is decided. */
  onElected(result: ElectionResult): void;
  /**
   * The group coordinator accepted a heartbeat of `generation` sent at `sentAtMs` (the controller's clock): nobody
   * else can be elected before that plus the session timeout (the basis of the leader's lease).
   */
  onConfirmed(generation: number, sentAtMs: number): void;
  /** The membership ended or broke (crash of the consumer, left the group); it may rejoin later. */
  onLost(reason: string): void;
}

export interface ControllerElection {
  /** Joins the group and keeps rejoining; results arrive on the listener. */
  start(listener: ElectionListener): Promise<void>;
  /** Leaves the group, so a successor is elected at once rather than after the session timeout. Idempotent. */
  close(): Promise<void>;
}
