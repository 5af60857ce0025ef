// What a failover leader persists of its concurrency throttlers (docs/design.md §11.2, §5.2), beside the
// bucket balances and in the same record, so a successor never starts with units free that a
// holder still uses. Holders' units are persisted, not their expiry: a holder could not renew while
// nobody led, so a successor gives a restored lease what is left of lease_timeout after the time
// leaders served without hearing from its holder (`silentMs`; none: a full lease_timeout).

/** One throttler's leases: units per holder (client id) and class, and the request ids recently granted. */
export interface PersistedLeases {
  readonly holders: Readonly<Record<string, Readonly<Record<string, number>>>>;
  /**
   * Grants a client may still replay (a lost answer, a retry that reaches the successor): the
   * successor answers them from the restored lease instead of leasing the units a second time.
   */
  readonly requestIds: readonly PersistedRequestId[];
  /**
   * Per holder, the time leaders served without hearing from it (ms, in steps of a tenth of
   * lease_timeout), where that is not 0: a successor's lease for it is lease_timeout less this, so a
   * holder that stopped renewing loses its units however many takeovers come in between.
   */
  readonly silentMs?: Readonly<Record<string, number>>;
}

export interface PersistedRequestId {
  readonly requestId: string;
  readonly clientId: string;
  readonly amount: number;
  readonly waitedMs: number;
  /** Epoch ms (failover controllers run on the system clock) after which the id is a new request. */
  readonly expiresAtMs: number;
}
