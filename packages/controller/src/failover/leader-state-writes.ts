import { SluiceError } from "@sluice/core";
import type { Controller } from "../controller.ts";
import type { ControllerStateStore } from "./controller-state-store.ts";
import { GroupCommit } from "./group-commit.ts";
import { describeCause, grantNotPersistedError } from "./state-write-errors.ts";

/** What the writes need to know of the leadership they write for (FailoverController holds it). */
export interface LeadershipView {
  /** The Controller that serves (or is taking over) now; null when none. */
  inner(): Controller | null;
  /** The generation whose lease is held and still valid at `now`; null when this controller may not write. */
  validGeneration(now: number): number | null;
  /** Whether the takeover is done and this controller serves as leader. */
  serving(): boolean;
  /** The refusal that sends a caller to the leader. */
  notLeader(): SluiceError;
}

export interface LeaderStateWritesOptions {
  readonly store: ControllerStateStore;
  readonly pipeline: string;
  readonly clock: { now(): number };
  readonly log: (line: string) => void;
  readonly leadership: LeadershipView;
}

/**
 * A leader's writes of the `buckets` record (DESIGN §7.4): the bucket balances, the units in use
 * and the adaptive loops' state of one moment, coalesced by a GroupCommit. A grant is answered only
 * once a write that began after it is acknowledged (`durable`), so a successor never starts fuller
 * than what was granted allows; an adaptive decision is persisted without anyone waiting for it.
 */
export class LeaderStateWrites {
  private readonly commit: GroupCommit;
  private lastWrittenAtMs: number | null = null;

  constructor(private readonly options: LeaderStateWritesOptions) {
    this.commit = new GroupCommit(() => this.writeBuckets());
  }

  /** Clock time of the last record this leader wrote or took over from; null before either. */
  get writtenAtMs(): number | null {
    return this.lastWrittenAtMs;
  }

  /** A takeover read a predecessor's record written at `writtenAtMs`. */
  tookOver(writtenAtMs: number): void {
    this.lastWrittenAtMs = writtenAtMs;
  }

  /** Resolves once a write that began after the call is acknowledged. */
  flush(): Promise<void> {
    return this.commit.flush();
  }

  /** Waits until the balances after a grant (`what`) are persisted and checks the leadership held throughout. */
  async durable(inner: Controller, what: string): Promise<void> {
    try {
      await this.commit.flush();
    } catch (error) {
      if (error instanceof SluiceError) throw error;
      throw grantNotPersistedError(this.options.pipeline, what, error);
    }
    const { leadership, clock } = this.options;
    if (leadership.inner() !== inner || leadership.validGeneration(clock.now()) === null) throw leadership.notLeader();
  }

  /** Persists after an adaptive decision while this controller leads with `inner`; a failed write waits for the next. */
  async persistAdaptive(inner: Controller): Promise<void> {
    const { leadership } = this.options;
    if (leadership.inner() !== inner || !leadership.serving()) return;
    try {
      await this.commit.flush();
    } catch (error) {
      if (leadership.inner() === inner) this.options.log(`persisting the adaptive limits failed (${describeCause(error)}); the next decision or grant writes them`);
    }
  }

  private async writeBuckets(): Promise<void> {
    const { leadership, clock } = this.options;
    const inner = leadership.inner();
    const now = clock.now();
    const generation = leadership.validGeneration(now);
    // A deposed leader writes nothing: its write could land after its successor's.
    if (!inner || generation === null) throw leadership.notLeader();
    // The leases go in the same record: a successor sees balances and units in use of one moment.
    const record = { buckets: inner.bucketBalances(), leases: inner.leaseState(), adaptive: inner.adaptiveState(), generation, writtenAtMs: now };
    await this.options.store.saveBuckets(record);
    this.lastWrittenAtMs = now;
  }
}
