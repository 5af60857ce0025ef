import { SluiceError, type Clock } from "@sluice/core";
import type {
  CallContext,
  DescribeThrottlersFilter,
  DynamicSpecUpdate,
  QuotaServiceHandler,
  ReleaseQuotaCall,
  ReportWatermarksCall,
  ReportWatermarksResult,
  RequestQuotaCall,
  RequestQuotaResult,
  RenewLeasesCall,
} from "@sluice/protocol";
import type { Controller, ControllerSnapshot } from "../quota/controller.ts";
import type { ElectionResult, ControllerState, StateWriterFencedError } from "@sluice/failover-ports";
import type { FailoverControllerOptions } from "./failover-options.ts";
import type { FailoverRole, FailoverStatus } from "../quota/failover-status.ts";
import { knownLeader } from "./known-leader.ts";
import { LeaderLease } from "./leader-lease.ts";
import { LeaseWatch } from "./lease-watch.ts";
import { notLeaderError } from "./not-leader-error.ts";
import { restorePersistedState } from "./restore-state.ts";
import { specInForce } from "./spec-in-force.ts";
import { LeaderStateWrites } from "./leader-state-writes.ts";
import { SpecUpdates } from "./spec-updates.ts";
import { describeCause } from "./state-write-errors.ts";
import { buildLeaderController, readStateForTakeover } from "./take-over.ts";

export type { FailoverControllerOptions } from "./failover-options.ts";

/**
 * One controller of a failover group (docs/design.md §5.2). It serves quota only while it leads: elected by
 * the group, within its lease, and after it has read back what its predecessor persisted. Each
 * answer waits until the bucket balances after that grant are persisted (LeaderStateWrites), so a
 * successor never starts fuller than what was granted allows. Followers refuse every call with
 * CONTROLLER_UNAVAILABLE naming the leader (trailer `sluice-leader`), and clients go there.
 *
 * This class holds the role and reacts to the election; the pieces it composes each hold one concept:
 * the lease and its timer (leader-lease.ts, lease-watch.ts), where callers are sent (known-leader.ts,
 * not-leader-error.ts), the state hand-over (take-over.ts, spec-in-force.ts, restore-state.ts) and
 * the writes of the state (leader-state-writes.ts, group-commit.ts, state-write-errors.ts) and the
 * reconfigurations, persisted before they are put in force (spec-updates.ts).
 */
export class FailoverController implements QuotaServiceHandler {
  private readonly lease: LeaderLease;
  private readonly leaseWatch: LeaseWatch;
  private readonly writes: LeaderStateWrites;
  private readonly specUpdates: SpecUpdates;
  private readonly log: (line: string) => void;
  private readonly clock: Clock;
  private inner: Controller | null = null;
  private role: FailoverRole = "starting";
  private generation: number | null = null;
  private memberId = "";
  private elections = 0;
  private leaderships = 0;
  private leaderSinceMs: number | null = null;
  /**
   * The group membership this controller lost and has not had an election result since: why and
   * when, for the refusals that say why no leader is known (the latest cause, the first time).
   */
  private lostMembership: { reason: string; atMs: number } | null = null;
  /** Bumped by every election result, so a takeover that was overtaken stops where it is. */
  private transition = 0;
  private readonly closing = new AbortController();

  constructor(private readonly options: FailoverControllerOptions) {
    this.clock = options.clock;
    this.log = options.log ?? (() => {});
    this.lease = new LeaderLease(options.leaseMs);
    this.leaseWatch = new LeaseWatch(this.lease, this.clock, () => {
      if (this.role === "leader" || this.role === "taking-over") this.fence();
    });
    this.writes = new LeaderStateWrites({
      store: options.store,
      pipeline: options.pipeline,
      clock: this.clock,
      log: this.log,
      leadership: {
        inner: () => this.inner,
        validGeneration: (now) => (this.lease.valid(now) ? this.lease.heldGeneration : null),
        serving: () => this.role === "leader",
        notLeader: () => this.notLeader(),
        fenced: (error) => this.lostWriter(error),
      },
    });
    this.specUpdates = new SpecUpdates({
      pipeline: options.pipeline,
      clock: this.clock,
      writes: this.writes,
      serving: () => this.serving(),
      validGeneration: (now) => (this.lease.valid(now) ? this.lease.heldGeneration : null),
      notLeader: () => this.notLeader(),
    });
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
        if (this.role === "closed") return;
        this.lostMembership = { reason, atMs: this.lostMembership?.atMs ?? this.clock.now() };
        this.stepDown(`the group membership ended (${reason})`, "follower");
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
    const stateAt = this.writes.writtenAtMs ?? newestWrite(this.options.store.latest());
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
      stateWriteErrors: this.writes.errors,
      stateWriteFailure: this.role === "leader" || this.role === "taking-over" ? this.writes.failure : null,
    };
  }

  /** The leader's snapshot with the failover status; a follower's has no throttlers. */
  snapshot(filter?: DescribeThrottlersFilter): ControllerSnapshot {
    const failover = this.status();
    const inner = this.current;
    if (inner) return { ...inner.snapshot(filter), failover };
    const version = this.options.store.latest().spec?.version ?? 0;
    return { version, generatedAt: new Date(this.clock.now()).toISOString(), throttlers: [], failover };
  }

  async requestQuota(call: RequestQuotaCall, context: CallContext): Promise<RequestQuotaResult> {
    const inner = this.serving();
    const result = await inner.requestQuota(call, context);
    await this.writes.durable(inner, `the grant of ${call.amount} on throttler "${call.throttlerId}"`);
    return result;
  }

  async releaseQuota(call: ReleaseQuotaCall, context: CallContext): Promise<void> {
    const inner = this.serving();
    await inner.releaseQuota(call, context);
    // A release only makes the persisted balance lower than the true one (never an over-grant), so
    // nobody waits for it; the next write carries it.
    this.writes.flush().catch(() => {});
  }

  /**
   * A renewal changes persisted state only when its holder had been silent long enough for its
   * silence to be persisted (after a takeover, or overdue): that renewal is answered once persisted,
   * or a successor would carry the silence on and end the lease early. Others wait for nothing.
   */
  async renewLeases(call: RenewLeasesCall, context: CallContext): Promise<{ held: number }> {
    const inner = this.serving();
    const before = inner.leaseRenewalsToPersist;
    const result = await inner.renewLeases(call, context);
    if (inner.leaseRenewalsToPersist !== before) await this.writes.durable(inner, `the renewal of client ${JSON.stringify(call.clientId)}'s leases`);
    return result;
  }

  watchDynamicSpec(clientId: string, emit: (update: DynamicSpecUpdate) => void, context: CallContext): Promise<void> {
    try {
      return this.serving().watchDynamicSpec(clientId, emit, context);
    } catch (error) {
      return Promise.reject(error);
    }
  }

  /** Answered once the new version is persisted and in force, in that order (SpecUpdates). */
  updateDynamicSpec(dynamicSpecJson: string, _context?: CallContext): Promise<{ version: number }> {
    return this.specUpdates.update(dynamicSpecJson);
  }

  /** Not persisted: after a failover every worker reports its partitions again (docs/design.md §12). */
  async reportWatermarks(call: ReportWatermarksCall, context: CallContext): Promise<ReportWatermarksResult> {
    return this.serving().reportWatermarks(call, context);
  }

  async describeThrottlers(_context?: CallContext, filter?: DescribeThrottlersFilter): Promise<{ snapshotJson: string }> {
    this.serving();
    return { snapshotJson: JSON.stringify(this.snapshot(filter)) };
  }

  /** Leaves the group (a successor is elected at once), fails waiters with CONTROLLER_UNAVAILABLE. Idempotent. */
  async close(): Promise<void> {
    if (this.role === "closed") return;
    this.closing.abort();
    this.stepDown("the controller is shutting down", "closed");
    await this.options.election.close().catch((error: unknown) => this.log(`leaving the controller group failed: ${describeCause(error)}`));
    await this.options.store.close();
  }

  // ───────────────────────────── election events ─────────────────────────────

  private onElected(result: ElectionResult): void {
    if (this.role === "closed") return;
    this.transition += 1;
    this.elections += 1;
    this.lostMembership = null;
    this.generation = result.generation;
    this.memberId = result.memberId;
    if (!result.leading) {
      this.stepDown(`generation ${result.generation} elected another controller`, "follower");
      this.log(`follower in generation ${result.generation}${this.knownLeader() ? `; the leader is ${this.knownLeader()}` : ""}`);
      return;
    }
    this.lease.grant(result.generation, Math.min(result.confirmedAtMs, this.clock.now()));
    this.leaseWatch.arm();
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
      this.leaseWatch.arm();
      this.transition += 1;
      void this.takeOver(generation, this.transition);
    }
  }

  private async takeOver(generation: number, transition: number): Promise<void> {
    this.role = "taking-over";
    this.closeInner("a new leadership begins");
    const state = await readStateForTakeover({
      store: this.options.store,
      clock: this.clock,
      signal: this.closing.signal,
      retryDelayMs: this.options.retryDelayMs ?? 1_000,
      generation,
      stillCurrent: () => transition === this.transition,
      log: this.log,
    });
    if (state === null || transition !== this.transition) return;
    const { spec, version, origin } = specInForce(state, this.options.dynamicSpec, this.options.computations, this.log);
    const inner = buildLeaderController(this.options, spec, version, (leading) => void this.writes.persistChanges(leading));
    const buckets = restorePersistedState(inner, state, this.clock.now());
    this.writes.tookOver(state);
    this.inner = inner;
    this.log(`taking over generation ${generation}: dynamic_spec version ${version} (${origin}); ${buckets}`);
    try {
      if (origin !== "persisted") {
        const record = { version, dynamicSpecJson: JSON.stringify(spec), generation, writtenAtMs: this.clock.now() };
        await this.writes.write({ spec: record }, `dynamic_spec version ${version}`);
      }
      await this.writes.flush();
    } catch (error) {
      if (transition !== this.transition) return;
      this.log(`taking over generation ${generation}: persisting the state failed (${describeCause(error)}); stepping down`);
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
      const leader = { address: this.options.address, memberId: this.memberId, generation, sinceMs: this.leaderSinceMs ?? this.clock.now() };
      await this.writes.write({ leader }, "the leader record");
      if (transition === this.transition && this.inner === inner) {
        this.log(`leader of pipeline "${this.options.pipeline}" in generation ${generation}, serving on ${this.options.address}`);
      }
    } catch (error) {
      this.log(`announcing the leadership failed (${describeCause(error)}); followers cannot name this leader until the next election`);
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

  private notLeader(): SluiceError {
    const lost = this.lostMembership;
    return notLeaderError({
      role: this.role,
      self: this.options.address,
      pipeline: this.options.pipeline,
      leader: this.knownLeader(),
      lostMembership: lost === null ? null : { reason: lost.reason, agoMs: Math.max(0, this.clock.now() - lost.atMs) },
    });
  }

  private knownLeader(): string | null {
    const announced = this.options.store.latest().leader;
    return knownLeader({ role: this.role, self: this.options.address, announced, generation: this.generation });
  }

  // ───────────────────────────── stepping down ─────────────────────────────

  /** Kafka fenced this controller's writer: another controller claimed it, so this one leads no more. */
  private lostWriter(error: StateWriterFencedError): void {
    if (this.role !== "leader" && this.role !== "taking-over") return;
    this.log(`LOST THE LEADERSHIP: ${error.message}; another controller claimed the state writer of pipeline ${JSON.stringify(this.options.pipeline)}`);
    this.stepDown("its state writer was fenced by a newer leader", "fenced");
    this.transition += 1;
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
    this.leaseWatch.disarm();
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

/** The newest write time among the records read (what a follower shows as the state's age). */
function newestWrite(state: ControllerState): number | null {
  let newest: number | null = null;
  for (const record of state.throttlers.values()) newest = Math.max(newest ?? record.writtenAtMs, record.writtenAtMs);
  for (const keys of state.keys.values()) for (const record of keys.values()) newest = Math.max(newest ?? record.writtenAtMs, record.writtenAtMs);
  return newest;
}
