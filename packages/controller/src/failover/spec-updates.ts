import type { SluiceError } from "@sluice/core";
import type { Controller } from "../quota/controller.ts";
import type { LeaderStateWrites } from "./leader-state-writes.ts";
import { specNotPersistedError, specPersistedNotAppliedError } from "./state-write-errors.ts";

export interface SpecUpdatesOptions {
  readonly pipeline: string;
  readonly clock: { now(): number };
  readonly writes: LeaderStateWrites;
  /** The Controller that serves now, or the refusal that sends the caller to the leader. */
  readonly serving: () => Controller;
  /** The generation whose lease is held and valid at `now`; null when this controller may not write. */
  readonly validGeneration: (now: number) => number | null;
  readonly notLeader: () => SluiceError;
}

/**
 * A failover leader's reconfigurations (UpdateDynamicSpec, docs/design.md §5.2, §5.3): each new version is
 * committed to `<pipeline>.controller-state` first and only then put in force — served to watchers,
 * grants and DescribeThrottlers — and answered. A version served before it is committed could be
 * unknown to a successor, which would serve an older one: the version in force would go back and
 * the reconfiguration would be lost. Updates go one at a time, so each is checked against and
 * persisted as the version after the one in force when it is applied.
 */
export class SpecUpdates {
  private queue: Promise<unknown> = Promise.resolve();

  constructor(private readonly options: SpecUpdatesOptions) {}

  /** Persists then applies `dynamicSpecJson`; resolves with its version once it is both. */
  update(dynamicSpecJson: string): Promise<{ version: number }> {
    const turn = this.queue.then(() => this.persistThenApply(dynamicSpecJson));
    this.queue = turn.catch(() => undefined);
    return turn;
  }

  private async persistThenApply(dynamicSpecJson: string): Promise<{ version: number }> {
    const { pipeline, clock, writes } = this.options;
    const inner = this.options.serving();
    const { spec, version } = inner.checkDynamicSpec(dynamicSpecJson);
    const generation = this.options.validGeneration(clock.now());
    if (generation === null) throw this.options.notLeader();
    const record = { version, dynamicSpecJson: JSON.stringify(spec), generation, writtenAtMs: clock.now() };
    try {
      await writes.write({ spec: record }, `dynamic_spec version ${version}`);
    } catch (error) {
      // Nothing was put in force, so the version stays free: a retry gets this same number.
      throw specNotPersistedError(pipeline, version, inner.version, error);
    }
    let serving: Controller;
    try {
      serving = this.options.serving();
    } catch {
      throw specPersistedNotAppliedError(pipeline, version, this.options.notLeader());
    }
    // A new leadership began during the write: it read the state after claiming the writer, so it
    // serves this version already or a later one.
    if (serving !== inner) throw specPersistedNotAppliedError(pipeline, version, this.options.notLeader());
    inner.applyDynamicSpec(spec, version);
    return { version };
  }
}
