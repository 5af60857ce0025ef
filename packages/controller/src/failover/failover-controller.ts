import { SluiceError, type Clock } from "@sluice/core";
import type {
  CallContext,
  DynamicSpecUpdate,
  QuotaServiceHandler,
  ReleaseQuotaCall,
  ReportWatermarksCall,
  ReportWatermarksResult,
  RequestQuotaCall,
  RequestQuotaResult,
  RenewLeasesCall,
} from "@sluice/protocol";
import { Controller, type ControllerSnapshot } from "../controller.ts";
import type { ElectionResult } from "./controller-election.ts";
import type { ControllerState } from "./controller-state-store.ts";
import type { FailoverRole, FailoverStatus } from "./failover-status.ts";
import { GroupCommit } from "./group-commit.ts";
import { LeaderLease } from "./leader-lease.ts";
import { notLeaderError } from "./not-leader-error.ts";
import type { FailoverControllerOptions } from "./failover-options.ts";
import { restorePersistedState } from "./restore-state.ts";

export type { FailoverControllerOptions } from "./failover-options.ts";
import { specInForce } from "./spec-in-force.ts";


/**
 * One controller of a failover group (DESIGN §7.4). It serves quota only while it leads: elected by
 * the group, within its lease, and after it has read back what its predecessor persisted. Each
 * answer waits until the bucket balances after that grant are persisted (GroupCommit), so a
 * successor never starts fuller than what was granted allows. Followers refuse every call with
 * CONTROLLER_UNAVAILABLE naming the leader (trailer `sluice-leader`), and clients go there.
 */
export class FailoverController implements QuotaServiceHandler {
  private readonly lease: LeaderLease;
  private readonly commit: GroupCommit;
  private readonly log: (line: string) => void;
  private readonly clock: Clock;
  private inner: Controller | null = null;
  private role: FailoverRole = "starting";
  private generation: number | null = null;
  private memberId = "";
  private elections = 0;
  private leaderships = 0;
  private leaderSinceMs: number | null = null;
  private stateWrittenAtMs: number | null = null;
  /** Bumped by every election result, so a takeover that was overtaken stops where it is. */
  private transition = 0;
  private leaseWatch: AbortController | null = null;
  private readonly closing = new AbortController();

  constructor(private readonly options: FailoverControllerOptions) {
    this.clock = options.clock;
    this.log = options.log ?? (() => {});
    this.lease = new LeaderLease(options.leaseMs);
    this.commit = new GroupCommit(() => this.writeBalances());
  }

  /** Starts reading the state and joins the election. */
  async start(): Promise<void> {
    await this.options.store.start();
    await this.options.election.start({
      claim: () => {
        const generation = this.lease.heldGeneration;
        return this.role === "leader" && generation !== null && this.lease.valid(this.clock.now()) ? { generation } : null;
      },
      onElected: (result) => this.onElected(result),
      onConfirmed: (generation, sentAtMs) => this.onConfirmed(generation, sentAtMs),
      onLost: (reason) => {
        if (this.role !== "closed") this.stepDown(`the group membership ended (${reason})`, "follower");
      },
    });
  }

  /** The controller that serves now, when this one leads; for in-process callers (dashboard). */
  get current(): Controller | null {
    return this.role === "leader" ? this.inner : null;
  }

  status(): FailoverStatus {
    const now = this.clock.now();
    const leader = this.knownLeader();
    const expiresAt = this.role === "leader" ? this.lease.expiresAt() : null;
    const stateAt = this.stateWrittenAtMs ?? this.options.store.latest().buckets?.writtenAtMs ?? null;
    const since = this.role === "leader" ? this.leaderSinceMs : (this.options.store.latest().leader?.sinceMs ?? null);
    return {
      role: this.role,
      address: this.options.address,
      leader,
      leaderSince: since === null ? null : new Date(since).toISOString(),
      generation: this.generation,
      elections: this.elections,
      leaderships: this.leaderships,
      stateWrittenAt: stateAt === null ? null : new Date(stateAt).toISOString(),
      stateAgeMs: stateAt === null ? null : Math.max(0, now - stateAt),
      leaseRemainingMs: expiresAt === null ? null : Math.max(0, expiresAt - now),
    };
  }

  /** The leader's snapshot with the failover status; a follower's has no throttlers. */
  snapshot(): ControllerSnapshot {
    const failover = this.status();
    const inner = this.current;
    if (inner) return { ...inner.snapshot(), failover };
    const version = this.options.store.latest().spec?.version ?? 0;
    return { version, generatedAt: new Date(this.clock.now()).toISOString(), throttlers: [], failover };
  }

  async requestQuota(call: RequestQuotaCall, context: CallContext): Promise<RequestQuotaResult> {
    const inner = this.serving();
    const result = await inner.requestQuota(call, context);
    await this.durable(inner, `the grant of ${call.amount} on throttler "${call.throttlerId}"`);
    return result;
  }

  async releaseQuota(call: ReleaseQuotaCall, context: CallContext): Promise<void> {
    const inner = this.serving();
    await inner.releaseQuota(call, context);
    // A release only makes the persisted balance lower than the true one (never an over-grant), so
    // nobody waits for it; the next write carries it.
    this.commit.flush().catch(() => {});
  }

  /**
   * Renewals change no persisted state (a successor gives every restored lease a full lease_timeout),
   * so nothing waits for a write.
   */
  renewLeases(call: RenewLeasesCall, context: CallContext): Promise<{ held: number }> {
    try {
      return this.serving().renewLeases(call, context);
    } catch (error) {
      return Promise.reject(error);
    }
  }

  watchDynamicSpec(clientId: string, emit: (update: DynamicSpecUpdate) => void, context: CallContext): Promise<void> {
    try {
      return this.serving().watchDynamicSpec(clientId, emit, context);
    } catch (error) {
      return Promise.reject(error);
    }
  }

  async updateDynamicSpec(dynamicSpecJson: string, context?: CallContext): Promise<{ version: number }> {
    const inner = this.serving();
    const answer = await inner.updateDynamicSpec(dynamicSpecJson, context);
    const generation = this.lease.heldGeneration;
    if (this.inner !== inner || generation === null || !this.lease.valid(this.clock.now())) throw this.notLeader();
    try {
      await this.options.store.saveSpec({
        version: answer.version,
        dynamicSpecJson: JSON.stringify(inner.dynamicSpec),
        generation,
        writtenAtMs: this.clock.now(),
      });
    } catch (error) {
      throw new SluiceError(
        "CONTROLLER_UNAVAILABLE",
        `dynamic_spec version ${answer.version} is in force on this leader but could not be persisted to ` +
          `"${this.options.pipeline}.controller-state" (${describe(error)}), so a successor would not know it: send it again`,
        { version: answer.version },
        { cause: error },
      );
    }
    return answer;
  }

  /** Not persisted: after a failover every worker reports its partitions again (DESIGN §7.5). */
  async reportWatermarks(call: ReportWatermarksCall, context: CallContext): Promise<ReportWatermarksResult> {
    return this.serving().reportWatermarks(call, context);
  }

  async describeThrottlers(_context?: CallContext): Promise<{ snapshotJson: string }> {
    this.serving();
    return { snapshotJson: JSON.stringify(this.snapshot()) };
  }

  /** Leaves the group (a successor is elected at once), fails waiters with CONTROLLER_UNAVAILABLE. Idempotent. */
  async close(): Promise<void> {
    if (this.role === "closed") return;
    this.closing.abort();
    this.stepDown("the controller is shutting down", "closed");
    await this.options.election.close().catch((error: unknown) => this.log(`leaving the controller group failed: ${describe(error)}`));
    await this.options.store.close();
  }

  // ───────────────────────────── election events ─────────────────────────────

  private onElected(result: ElectionResult): void {
    if (this.role === "closed") return;
    this.transition += 1;
    this.elections += 1;
    this.generation = result.generation;
    this.memberId = result.memberId;
    if (!result.leading) {
      this.stepDown(`generation ${result.generation} elected another controller`, "follower");
      this.log(`follower in generation ${result.generation}${this.knownLeader() ? `; the leader is ${this.knownLeader()}` : ""}`);
      return;
    }
    this.lease.grant(result.generation, Math.min(result.confirmedAtMs, this.clock.now()));
    this.watchLease();
    if (this.inner && this.role === "leader") {
      // Kept the leadership through a rebalance: same buckets, a new epoch to announce.
      void this.announce(this.inner, result.generation, this.transition);
      return;
    }
    void this.takeOver(result.generation, this.transition);
  }

  private onConfirmed(generation: number, sentAtMs: number): void {
    const at = Math.min(sentAtMs, this.clock.now());
    if (generation !== this.lease.heldGeneration && this.role !== "fenced") return;
    this.lease.confirm(generation, at);
    if (this.role === "fenced" && generation === this.generation && this.lease.heldGeneration === null && this.lease.leaseMs > this.clock.now() - at) {
      // The lease ran out but the group never moved on (same generation): nobody else led meanwhile.
      this.lease.grant(generation, at);
      this.watchLease();
      this.transition += 1;
      void this.takeOver(generation, this.transition);
    }
  }

  private async takeOver(generation: number, transition: number): Promise<void> {
    this.role = "taking-over";
    this.closeInner("a new leadership begins");
    let state: ControllerState;
    for (;;) {
      try {
        state = await this.options.store.catchUp(this.closing.signal);
        break;
      } catch (error) {
        if (transition !== this.transition) return;
        this.log(`taking over generation ${generation}: reading the state failed (${describe(error)}); retrying`);
        try {
          await this.clock.sleep(this.options.retryDelayMs ?? 1_000, this.closing.signal);
        } catch {
          return; // closed
        }
        if (transition !== this.transition) return;
      }
    }
    if (transition !== this.transition) return;
    const { spec, version, origin } = specInForce(state, this.options.dynamicSpec, this.options.computations, this.log);
    const inner = new Controller({
      dynamicSpec: spec,
      computations: this.options.computations,
      clock: this.clock,
      initialVersion: version,
      log: this.log,
      ...(this.options.tracer ? { tracer: this.options.tracer } : {}),
      ...(this.options.detachedGraceMs !== undefined ? { detachedGraceMs: this.options.detachedGraceMs } : {}),
      ...(this.options.baseDir !== undefined ? { baseDir: this.options.baseDir } : {}),
      ...(this.options.loadSourceOf ? { loadSourceOf: this.options.loadSourceOf } : {}),
      // A decision of an adaptive loop changes persisted state even when no grant does.
      onAdaptiveDecision: () => void this.persistAdaptive(inner),
    });
    const buckets = restorePersistedState(inner, state.buckets, this.clock.now());
    if (state.buckets) this.stateWrittenAtMs = state.buckets.writtenAtMs;
    this.inner = inner;
    this.log(`taking over generation ${generation}: dynamic_spec version ${version} (${origin}); ${buckets}`);
    try {
      if (origin !== "persisted") {
        await this.options.store.saveSpec({ version, dynamicSpecJson: JSON.stringify(spec), generation, writtenAtMs: this.clock.now() });
      }
      await this.commit.flush();
    } catch (error) {
      if (transition !== this.transition) return;
      this.log(`taking over generation ${generation}: persisting the state failed (${describe(error)}); stepping down`);
      this.stepDown("the state could not be persisted", "fenced");
      return;
    }
    if (transition !== this.transition || this.inner !== inner) return;
    this.role = "leader";
    this.leaderships += 1;
    this.leaderSinceMs = this.clock.now();
    await this.announce(inner, generation, transition);
  }

  private async announce(inner: Controller, generation: number, transition: number): Promise<void> {
    try {
      await this.options.store.saveLeader({
        address: this.options.address,
        memberId: this.memberId,
        generation,
        sinceMs: this.leaderSinceMs ?? this.clock.now(),
      });
      if (transition === this.transition && this.inner === inner) {
        this.log(`leader of pipeline "${this.options.pipeline}" in generation ${generation}, serving on ${this.options.address}`);
      }
    } catch (error) {
      this.log(`announcing the leadership failed (${describe(error)}); followers cannot name this leader until the next election`);
    }
  }

  // ───────────────────────────── serving ─────────────────────────────

  /** The Controller to serve a call with, or the refusal that sends the caller to the leader. */
  private serving(): Controller {
    const inner = this.inner;
    if (this.role === "leader" && inner && this.lease.valid(this.clock.now())) return inner;
    if (this.role === "leader") this.fence();
    throw this.notLeader();
  }

  /** Waits until the balances after a grant are persisted and checks the leadership held throughout. */
  private async durable(inner: Controller, what: string): Promise<void> {
    try {
      await this.commit.flush();
    } catch (error) {
      if (error instanceof SluiceError) throw error;
      throw new SluiceError(
        "CONTROLLER_UNAVAILABLE",
        `${what} could not be persisted to "${this.options.pipeline}.controller-state" (${describe(error)}); retry with the same request id`,
        {},
        { cause: error },
      );
    }
    if (this.inner !== inner || !this.lease.valid(this.clock.now())) throw this.notLeader();
  }

  private async writeBalances(): Promise<void> {
    const inner = this.inner;
    const generation = this.lease.heldGeneration;
    const now = this.clock.now();
    // A deposed leader writes nothing: its write could land after its successor's.
    if (!inner || generation === null || !this.lease.valid(now)) throw this.notLeader();
    // The leases go in the same record: a successor sees balances and units in use of one moment.
    const record = { buckets: inner.bucketBalances(), leases: inner.leaseState(), adaptive: inner.adaptiveState(), generation, writtenAtMs: now };
    await this.options.store.saveBuckets(record);
    this.stateWrittenAtMs = now;
  }

  /** Persists after an adaptive decision while this controller leads with `inner`; a failed write waits for the next. */
  private async persistAdaptive(inner: Controller): Promise<void> {
    if (this.inner !== inner || this.role !== "leader") return;
    try {
      await this.commit.flush();
    } catch (error) {
      if (this.inner === inner) this.log(`persisting the adaptive limits failed (${describe(error)}); the next decision or grant writes them`);
    }
  }

  private notLeader(): SluiceError {
    return notLeaderError({ role: this.role, self: this.options.address, pipeline: this.options.pipeline, leader: this.knownLeader() });
  }

  private knownLeader(): string | null {
    if (this.role === "leader" || this.role === "taking-over") return this.options.address;
    const record = this.options.store.latest().leader;
    // A record of an older generation may name a controller that is gone: no hint beats a wrong one.
    if (record === null || (this.generation !== null && record.generation < this.generation)) return null;
    return record.address;
  }

  // ───────────────────────────── stepping down ─────────────────────────────

  /** Arms a timer for the end of the lease, so a leader that lost it fails its waiters promptly. */
  private watchLease(): void {
    this.leaseWatch?.abort();
    const watch = new AbortController();
    this.leaseWatch = watch;
    const loop = async () => {
      while (!watch.signal.aborted) {
        const expiresAt = this.lease.expiresAt();
        if (expiresAt === null) return;
        const now = this.clock.now();
        if (now >= expiresAt) {
          if (this.role === "leader" || this.role === "taking-over") this.fence();
          return;
        }
        try {
          await this.clock.sleep(Math.ceil(expiresAt - now), watch.signal);
        } catch {
          return;
        }
      }
    };
    void loop();
  }

  private fence(): void {
    const expiresAt = this.lease.expiresAt();
    const ago = expiresAt === null ? "" : ` ${Math.round(Math.max(0, this.clock.now() - (expiresAt - this.lease.leaseMs)))} ms ago`;
    this.stepDown(`the lease of generation ${this.lease.heldGeneration} lapsed: last confirmed${ago}, lease ${this.lease.leaseMs} ms`, "fenced");
    this.transition += 1;
  }

  private stepDown(reason: string, role: FailoverRole): void {
    const wasServing = this.inner !== null;
    this.lease.revoke();
    this.leaseWatch?.abort();
    this.leaseWatch = null;
    this.closeInner(reason);
    if (wasServing && role !== "closed") this.log(`stepped down: ${reason}; grants nothing more`);
    this.role = role;
    this.leaderSinceMs = null;
  }

  private closeInner(reason: string): void {
    const inner = this.inner;
    this.inner = null;
    inner?.close(
      new SluiceError(
        "CONTROLLER_UNAVAILABLE",
        `the controller at ${this.options.address} stopped leading pipeline ${JSON.stringify(this.options.pipeline)} (${reason}); retry against the leader`,
        { address: this.options.address },
      ),
    );
  }
}

function describe(error: unknown): string {
  return error instanceof Error ? error.message : String(error);
}
