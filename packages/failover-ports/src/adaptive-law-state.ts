// The state of the adaptive law between two decisions. Its own file because failover persists it
// (PersistedAdaptive) and the record types must not depend on the law's code.

export interface AdaptiveLawState {
  /** The limit the law last decided (in force, or only suggested under dry_run). */
  readonly limit: number;
  /** Failed readings in a row. */
  readonly failures: number;
  /** Whether the last decision raised the limit: the next reading then still lags that raise. */
  readonly raisedLast: boolean;
  /** Whether the last decision cut the limit: the next reading then still lags that cut. */
  readonly cutLast?: boolean;
  /** Whether the last reading was inside the band right after a raise: a saturated one next cuts to ×0.8, not ×0.6. */
  readonly inBandAfterRaise?: boolean;
  /** The side of the band the last reading fell on when it was in the near zone (two below in a row raise). */
  readonly near?: "above" | "below";
  /** The edge of the band the last reading fell on when it was inside, near that edge (two in a row move a unit). */
  readonly edge?: "low" | "high";
  /**
   * Whether the last reading was inside the band or just above it, with no raise in the decision
   * before it: a next one far above the band then means the system changed, not the work admitted.
   */
  readonly steadyLast?: boolean;
  /**
   * Readings since a capacity-loss cut (0: the last decision was that cut), while they still hold
   * it: the reading lags the cut, so readings above the band hold while the cut comes through.
   */
  readonly sinceLossCut?: number;
  /** The last good reading: after a capacity-loss cut, a falling reading is the cut coming through. */
  readonly lastLoad?: number;
  /** The use at the last decision: a reading right after a raise still shows the use from before it. */
  readonly lastUse?: number;
}
