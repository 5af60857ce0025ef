import { SluiceError } from "@sluice/core";
import type { Controller } from "../quota/controller.ts";
import { StateWriterFencedError, type ControllerState, type ControllerStateStore, type StateWrite } from "@sluice/failover-ports";
import { GroupCommit } from "./group-commit.ts";
import { describeCause, grantNotPersistedError } from "./state-write-errors.ts";
import { WrittenRecords } from "./written-records.ts";

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
  /** The store fenced this controller's writer: another controller claimed it, so this one no longer leads. */
  fenced(error: StateWriterFencedError): void;
}

export interface LeaderStateWritesOptions {
  readonly store: ControllerStateStore;
  readonly pipeline: string;
  readonly clock: { now(): number };
  readonly log: (line: string) => void;
  readonly leadership: LeadershipView;
}

/** Repeats of one failure are logged at most this often (a broker outage fails every write). */
const REPEAT_LOG_MS = 5_000;

/**
 * A leader's writes of `<pipeline>.controller-state` (docs/design.md §5.3). The throttlers' records are
 * coalesced by a GroupCommit, and only those that changed are written (a write looks at the keys of
 * keyed throttlers that may have changed only: written-records.ts); a grant is answered only
 * once a write that began after it is committed (`durable`), so a successor never starts fuller
 * than what was granted allows. Every failed write is logged, counted and kept for /healthz until
 * a write succeeds again; a fenced writer is a lost leadership.
 */
export class LeaderStateWrites {
  private readonly commit: GroupCommit;
  private lastWrittenAtMs: number | null = null;
  /** The last record written (or taken over) per throttler and per key: what a successor would restore now. */
  private readonly written = new WrittenRecords();
  private failures = 0;
  private failing: string | null = null;
  private lastLogged: { message: string; atMs: number } | null = null;

  constructor(private readonly options: LeaderStateWritesOptions) {
    this.commit = new GroupCommit(() => this.writeThrottlers());
  }

  /** Clock time of the last record this leader wrote or took over from; null before either. */
  get writtenAtMs(): number | null {
    return this.lastWrittenAtMs;
  }

  /** Writes that failed since this controller started. */
  get errors(): number {
    return this.failures;
  }

  /** Why the latest write failed, while no write has succeeded since; null otherwise. */
  get failure(): string | null {
    return this.failing;
  }

  /**
   * A takeover read these records: each is rewritten by this leader's first write (under its own
   * writer), and those of throttlers no longer declared (and of keys now full or forgotten) are deleted.
   */
  tookOver(state: Pick<ControllerState, "throttlers" | "keys">): void {
    const records = [...state.throttlers.values(), ...[...state.keys.values()].flatMap((keys) => [...keys.values()])];
    this.written.tookOver(records);
    let latest: number | null = null;
    for (const record of records) latest = Math.max(latest ?? record.writtenAtMs, record.writtenAtMs);
    this.lastWrittenAtMs = latest;
  }

  /** Resolves once a write that began after the call is committed. */
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

  /** Persists after an adaptive decision or a lease change while this controller leads with `inner`; a failed write waits for the next. */
  async persistChanges(inner: Controller): Promise<void> {
    const { leadership } = this.options;
    if (leadership.inner() !== inner || !leadership.serving()) return;
    await this.commit.flush().catch(() => {}); // logged and counted by write()
  }

  /** Writes records other than the throttlers' (spec, leader): logged, counted and fenced like them. */
  async write(records: StateWrite, what: string): Promise<void> {
    try {
      await this.options.store.write(records);
    } catch (error) {
      this.failed(what, error);
      throw error;
    }
    this.failing = null;
  }

  private async writeThrottlers(): Promise<void> {
    const { leadership, clock } = this.options;
    const inner = leadership.inner();
    const now = clock.now();
    const generation = leadership.validGeneration(now);
    // A deposed leader writes nothing; a write of one already under way is fenced by the store.
    if (!inner || generation === null) throw leadership.notLeader();
    const changes = this.written.changes(inner, generation, now);
    const { throttlers: changed, removedThrottlers, removedKeys } = changes;
    const removed = removedThrottlers.length + removedKeys.length;
    if (changed.length > 0 || removed > 0) {
      await this.write(
        { throttlers: changed, removedThrottlers, ...(removedKeys.length > 0 ? { removedKeys } : {}) },
        `the records of ${changed.length + removed} ${removedKeys.length > 0 || changed.some((r) => r.key !== undefined) ? "throttler(s) and key(s)" : "throttler(s)"}`,
      );
    }
    this.written.committed(changes, now);
    this.lastWrittenAtMs = now;
  }

  private failed(what: string, error: unknown): void {
    this.failures += 1;
    const message = describeCause(error);
    this.failing = message;
    if (error instanceof StateWriterFencedError) {
      this.options.log(`writing ${what} to "${this.options.pipeline}.controller-state" was refused: ${message}`);
      this.options.leadership.fenced(error);
      return;
    }
    const now = this.options.clock.now();
    const last = this.lastLogged;
    if (last && last.message === message && now - last.atMs < REPEAT_LOG_MS) return;
    this.lastLogged = { message, atMs: now };
    this.options.log(
      `writing ${what} to "${this.options.pipeline}.controller-state" failed (${message}; ${this.failures} failed write(s) so far): ` +
        "grants wait for a write that succeeds and are refused meanwhile (CONTROLLER_UNAVAILABLE, retriable)",
    );
  }
}
