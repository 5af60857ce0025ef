import { trace, type Tracer } from "@opentelemetry/api";
import { ownEntry, QUOTA_BUCKET_DEFAULTS, SluiceError, type Clock, type QuotaBucketConfig, type QuotaBucketDriver } from "@sluice/core";
import type {
  CallContext,
  DescribeThrottlersFilter,
  DynamicSpecUpdate,
  QuotaServiceHandler,
  ReleaseQuotaCall,
  RequestQuotaCall,
  RequestQuotaResult,
  RenewLeasesCall,
  ReportWatermarksCall,
  ReportWatermarksResult,
} from "@sluice/protocol";
import { DEFAULT_CLASS_ID, type DynamicSpec, type ThrottlerSpec } from "@sluice/spec";
import { AdaptiveLimits } from "../adaptive/adaptive-limits.ts";
import { AlignmentGroups } from "./alignment/alignment-groups.ts";
import type { LoadSource, LoadSpec } from "../adaptive/load-source.ts";
import type { PersistedAdaptive, PersistedLeases } from "@sluice/failover-ports";
import { bucketRequestNow } from "./bucket-request.ts";
import { checkReleaseAmount, refuseNeverFitting } from "./concurrency/concurrency-admission.ts";
import { ConcurrencyLeases } from "./concurrency/concurrency-leases.ts";
import { bucketConfigOf } from "./bucket-config.ts";
import type { BucketBalance, ControllerSnapshot, ControllerThrottlerSnapshot } from "./controller-snapshot.ts";
import { parseDynamicSpecUpdate } from "./dynamic-spec-parse.ts";
import { DynamicSpecWatchers } from "./dynamic-spec-watchers.ts";
import { releaseQuotaProblem, requestQuotaProblem, watchProblem } from "./request-limits.ts";
import { traceRequestQuota } from "./request-quota-span.ts";
import { ThrottlerDrivers } from "./throttler-drivers.ts";
import { isKeyed, KeyedThrottlers, notKeyedError, type PersistedKeyState } from "./keyed/keyed-throttlers.ts";
import { describedFor } from "./describe-filter.ts";

export type { BucketBalance, ControllerClassSnapshot, ControllerSnapshot, ControllerThrottlerSnapshot } from "./controller-snapshot.ts";
export type { PersistedKeyState } from "./keyed/keyed-throttlers.ts";

/**
 * What a failover leader reads of the keyed throttlers' keys to write only those that changed
 * (docs/design.md §5.3): `changedKeys` per keyed throttler (null: every key), then each key's state.
 */
export interface KeyedRecordSource {
  /** Per keyed throttler, the keys that may persist something else since the last call; null: every key of it (the first call, a reconfiguration). */
  changedKeys(): Map<string, ReadonlySet<string> | null>;
  /** What one key persists now: a rate key's balance, a concurrency key's leases; undefined for nothing. */
  keyState(throttlerId: string, key: string): PersistedKeyState | undefined;
  /** keyState of every key of one keyed throttler that has one. */
  keyStates(throttlerId: string): Map<string, PersistedKeyState>;
}

export interface ControllerOptions {
  /** The validated dynamic_spec the controller starts with (version 1). */
  readonly dynamicSpec: DynamicSpec;
  /** The pipeline's computation names: a new dynamic_spec may only configure these. */
  readonly computations: readonly string[];
  /**
   * Drives every bucket. Call deadlines (`CallContext.deadlineAt`, epoch ms) are read on this clock,
   * so a controller serving real callers runs on the system clock.
   */
  readonly clock: Clock;
  /** One line per event worth a log (reconfigurations, shutdown). */
  readonly log?: (line: string) => void;
  /** How long a timed-out or cancelled request keeps its place. Default QUOTA_BUCKET_DEFAULTS.detachedGraceMs. */
  readonly detachedGraceMs?: number;
  /**
   * Records a span per RequestQuota, a child of the caller's span when the call carries W3C trace
   * context. Default: the global tracer provider's (a no-op until an SDK registers one). `sluice run`
   * passes a tracer of its own so that the embedded controller's spans carry `sluice-controller`.
   */
  readonly tracer?: Tracer;
  /**
   * Version of `dynamicSpec`: 1 for a fresh pipeline; a controller taking over from persisted state
   * (docs/design.md §5.2) continues the version it found, so watchers never see it go back.
   */
  readonly initialVersion?: number;
  /** Directory an adaptive throttler's `load.module` is resolved against (the spec file's). Default: the working directory. */
  readonly baseDir?: string;
  /** Builds an adaptive throttler's load source (tests, the CLI); default: `loadSourceOf` (Prometheus over HTTP or the module). */
  readonly loadSourceOf?: (throttlerId: string, load: LoadSpec) => LoadSource;
  /** Called after every decision of an adaptive loop (a failover leader persists their state then). */
  readonly onAdaptiveDecision?: () => void;
  /** Called when a concurrency lease ended or a silent holder's persisted silence grew (a failover leader persists then). */
  readonly onLeasesChanged?: () => void;
  /** Watermark alignment: how long a partition no worker reports any more keeps holding its group (default 10 s). */
  readonly alignmentEntryTtlMs?: number;
}

/**
 * The controller's quota service: one QuotaBucketDriver per named throttler, the dynamic_spec and
 * its version, and the watchers that are told of every change (docs/design.md §2, §9, §4). Transport-free:
 * serve it with @sluice/protocol's serveQuotaService, or call it in memory.
 */
export class Controller implements QuotaServiceHandler {
  private readonly drivers: ThrottlerDrivers;
  private readonly sampling = new AbortController();
  private readonly clock: Clock;
  private readonly computations: readonly string[];
  private readonly log: (line: string) => void;
  private readonly detachedGraceMs: number;
  private readonly tracer: Tracer;
  private readonly adaptive: AdaptiveLimits;
  private readonly leases: ConcurrencyLeases;
  private readonly keyed: KeyedThrottlers;
  private readonly watchers: DynamicSpecWatchers;
  private readonly alignment: AlignmentGroups;
  private spec: DynamicSpec;
  private currentVersion = 1;
  /** The update every new watch is sent first: one string per spec version, shared by every watch. */
  private latestUpdate: DynamicSpecUpdate | null = null;
  private closedWith: SluiceError | null = null;

  constructor(options: ControllerOptions) {
    this.clock = options.clock;
    this.drivers = new ThrottlerDrivers(this.clock);
    this.computations = [...options.computations];
    this.log = options.log ?? (() => {});
    this.watchers = new DynamicSpecWatchers(this.log);
    this.detachedGraceMs = options.detachedGraceMs ?? QUOTA_BUCKET_DEFAULTS.detachedGraceMs;
    this.tracer = options.tracer ?? trace.getTracer("@sluice/controller");
    this.spec = options.dynamicSpec;
    this.currentVersion = options.initialVersion ?? 1;
    this.alignment = new AlignmentGroups({
      clock: this.clock,
      ...(options.alignmentEntryTtlMs !== undefined ? { entryTtlMs: options.alignmentEntryTtlMs } : {}),
    });
    this.adaptive = new AdaptiveLimits({
      clock: this.clock,
      log: this.log,
      baseDir: options.baseDir,
      sourceOf: options.loadSourceOf,
      decided: options.onAdaptiveDecision,
      setLimit: (id, limit) => {
        this.drivers.setLimit(id, limit);
        this.keyed.setAdaptiveLimit(id, limit);
      },
      sample: (id) => this.drivers.usageSample(id),
      // A keyed template's own bucket serves nothing: its loop sees its keys' use.
      usage: (id, elapsedMs) => this.keyed.adaptiveUsage(id, elapsedMs),
    });
    this.leases = new ConcurrencyLeases({
      clock: this.clock,
      log: this.log,
      leaseMsOf: (id) => {
        const throttler = ownEntry(this.spec.throttlers, id);
        return throttler?.kind === "concurrency" ? throttler.lease_timeout : null;
      },
      releaseUnits: (id, amount, classId) => this.drivers.get(id)?.release(amount, classId),
      holdUnits: (id, amount, classId) => this.drivers.get(id)?.holdRestoredUnits(amount, classId),
      // Never shorter than the bucket's own memory of granted ids, which a replay would otherwise reach.
      rememberMs: this.detachedGraceMs,
      ...(options.onLeasesChanged ? { persistedChanged: options.onLeasesChanged } : {}),
    });
    this.keyed = new KeyedThrottlers({ clock: this.clock, log: this.log, detachedGraceMs: this.detachedGraceMs, leasesChanged: options.onLeasesChanged });
    for (const [id, throttler] of Object.entries(options.dynamicSpec.throttlers)) {
      this.drivers.add(id, this.configOf(id, throttler));
    }
    this.adaptive.sync(options.dynamicSpec.throttlers);
    this.keyed.sync(options.dynamicSpec.throttlers, this.currentVersion, (id) => this.adaptiveLimitOf(id));
    void this.drivers.sampleRates(this.sampling.signal);
  }

  /** Version of the dynamic_spec in force: 1 at start, +1 per applied update. */
  get version(): number {
    return this.currentVersion;
  }

  get dynamicSpec(): DynamicSpec {
    return this.spec;
  }

  get closed(): boolean {
    return this.closedWith !== null;
  }

  /** `id=limit` of every throttler, e.g. `api=100/s, bytes=unlimited` (for startup and log lines). */
  describeLimits(): string {
    return this.drivers.describeLimits();
  }

  requestQuota(call: RequestQuotaCall, context: CallContext): Promise<RequestQuotaResult> {
    const settled = this.requestQuotaNow(call, context);
    return settled instanceof Promise ? settled : Promise.resolve(settled);
  }

  /** requestQuota, answering a grant the bucket makes at once with the result itself (the QuotaStream server's path). */
  requestQuotaNow(call: RequestQuotaCall, context: CallContext): RequestQuotaResult | Promise<RequestQuotaResult> {
    const malformed = requestQuotaProblem(call);
    if (malformed) return Promise.reject(malformed);
    return traceRequestQuota(this.tracer, this.clock, call, context, this.classIdOf(call), this.acquireCall);
  }

  /** acquire() as one function made once, for the span to call (not a closure per request). */
  private readonly acquireCall = (call: RequestQuotaCall, context: CallContext): RequestQuotaResult | Promise<RequestQuotaResult> =>
    this.acquire(call, context);

  /** Not async: a grant the bucket makes at once is answered with the grant itself, no promise. */
  private acquire(call: RequestQuotaCall, context: CallContext): RequestQuotaResult | Promise<RequestQuotaResult> {
    let driver: QuotaBucketDriver;
    try {
      driver = this.driverFor(call.throttlerId);
    } catch (error) {
      return Promise.reject(error);
    }
    const throttler = ownEntry(this.spec.throttlers, call.throttlerId);
    try {
      if (isKeyed(throttler)) return this.keyed.acquire(throttler, call, context);
      if (call.key) throw notKeyedError(call.throttlerId);
    } catch (error) {
      return Promise.reject(error);
    }
    if (throttler?.kind === "concurrency") {
      refuseNeverFitting(call, throttler);
      return this.leases.acquire(driver, call, context, this.classIdOf(call));
    }
    return driver.acquireNow(bucketRequestNow(call, context));
  }

  async releaseQuota(call: ReleaseQuotaCall, _context: CallContext): Promise<void> {
    const malformed = releaseQuotaProblem(call);
    if (malformed) throw malformed;
    const driver = this.driverFor(call.throttlerId);
    const throttler = ownEntry(this.spec.throttlers, call.throttlerId);
    if (isKeyed(throttler)) {
      this.keyed.release(call);
      return;
    }
    if (call.key) throw notKeyedError(call.throttlerId);
    if (throttler?.kind === "concurrency") {
      // Only what this client holds comes back: a late release of units whose lease already ended
      // must not free units another holder is using.
      checkReleaseAmount(call);
      this.leases.released(call.throttlerId, call.clientId, this.classIdOf(call), call.amount);
      return;
    }
    driver.release(call.amount, call.quotaClassId);
  }

  async renewLeases(call: RenewLeasesCall, _context: CallContext): Promise<{ held: number }> {
    this.throwIfClosed();
    return { held: this.leases.renew(call.clientId, call.throttlerIds) + this.keyed.renew(call.clientId, call.throttlerIds, call.key) };
  }

  /** Watermark alignment (docs/design.md §12): the worker's aligned partitions in, each one's bound out. */
  async reportWatermarks(call: ReportWatermarksCall, _context: CallContext): Promise<ReportWatermarksResult> {
    this.throwIfClosed();
    return this.alignment.report(call);
  }

  watchDynamicSpec(clientId: string, emit: (update: DynamicSpecUpdate) => void, context: CallContext): Promise<void> {
    if (this.closedWith) return Promise.reject(this.closedWith);
    const malformed = watchProblem(clientId);
    if (malformed) return Promise.reject(malformed);
    if (context.signal.aborted) return Promise.resolve();
    return this.watchers.watch(clientId, emit, context.signal, this.currentUpdate());
  }

  async updateDynamicSpec(dynamicSpecJson: string, _context?: CallContext): Promise<{ version: number }> {
    const { spec, version } = this.checkDynamicSpec(dynamicSpecJson);
    this.applyDynamicSpec(spec, version);
    return { version };
  }

  /**
   * Validates an update without applying it (SPEC_INVALID otherwise): the spec and the version it
   * would be in force as. A failover leader persists both before it puts them in force, so a version
   * is never served that a successor would not know.
   */
  checkDynamicSpec(dynamicSpecJson: string): { spec: DynamicSpec; version: number } {
    this.throwIfClosed();
    return { spec: parseDynamicSpecUpdate(dynamicSpecJson, this.computations, this.currentVersion), version: this.currentVersion + 1 };
  }

  /** Puts in force, as `version`, a spec checkDynamicSpec validated; `version` must still be the next one. */
  applyDynamicSpec(spec: DynamicSpec, version: number): void {
    this.throwIfClosed();
    if (version !== this.currentVersion + 1) {
      // A caller's bug (two updates checked against the same version): applying would skip or repeat one.
      throw new Error(`dynamic_spec version ${version} cannot follow version ${this.currentVersion}: it was checked against another version`);
    }
    this.apply(spec);
  }

  async describeThrottlers(_context?: CallContext, filter?: DescribeThrottlersFilter): Promise<{ snapshotJson: string }> {
    return { snapshotJson: JSON.stringify(this.snapshot(filter)) };
  }

  /** Each limited bucket's balance now; unlimited buckets have none and are left out. */
  bucketBalances(): Record<string, BucketBalance> {
    return this.drivers.balances();
  }

  /**
   * Sets the balances another controller persisted (docs/design.md §5.2): each bucket continues from its
   * balance plus what accrued since, never from full. Ids no longer declared are ignored.
   */
  restoreBalances(balances: Readonly<Record<string, BucketBalance>>): string[] {
    return this.drivers.restoreBalances(balances);
  }

  /**
   * Every keyed throttler's limited keys with their balances (docs/design.md §11.4), by throttler id then
   * key: what a failover leader persists as one `bucket/<throttler id>/<key>` record per key.
   */
  keyedBalances(): Map<string, Map<string, BucketBalance>> {
    return this.keyed.balances();
  }

  /**
   * The keyed throttlers' keys as a failover leader's incremental writes read them: which keys
   * changed since the last look, and the balance or leases of one key or of every key of a throttler.
   */
  keyedRecords(): KeyedRecordSource {
    return this.keyed;
  }

  /** A predecessor's key balances: each key continues from its balance (a key in debt stays in debt). */
  restoreKeyedBalance(throttlerId: string, key: string, balance: number, atMs: number): boolean {
    const keyed = this.keyed.get(throttlerId);
    if (!keyed) return false;
    keyed.restoreBalance(key, balance, atMs);
    return true;
  }

  /** Renewals that changed the persisted leases (a silent holder heard from again): a failover leader persists them before answering. */
  get leaseRenewalsToPersist(): number {
    return this.leases.silencesEnded + this.keyed.silencesEnded;
  }

  /**
   * The keyed concurrency throttlers' leases, by throttler id then key: what a failover leader
   * persists in each key's `bucket/<throttler id>/<key>` record (docs/design.md §11.4, §5.3).
   */
  keyedLeaseState(): Map<string, Record<string, PersistedLeases>> {
    return this.keyed.leaseState();
  }

  /** A predecessor's leases of one keyed concurrency throttler, by key; the units restored, null when it is not one now. */
  restoreKeyedLeases(throttlerId: string, byKey: Readonly<Record<string, PersistedLeases>>): number | null {
    return this.keyed.restoreLeases(throttlerId, byKey);
  }

  /** The concurrency throttlers' leases, persisted beside the balances by a failover leader (docs/design.md §5.2). */
  leaseState(): Record<string, PersistedLeases> {
    return this.leases.persisted();
  }

  /**
   * Takes over the leases another controller persisted: the units their holders still hold count as
   * in use here at once, instead of starting with every unit free. Returns the units per throttler.
   */
  restoreLeases(leases: Readonly<Record<string, PersistedLeases>>): Record<string, number> {
    return this.leases.restore(leases);
  }

  /** The adaptive loops' state, persisted beside the balances by a failover leader (docs/design.md §11.3, §5.2). */
  adaptiveState(): Record<string, PersistedAdaptive> {
    return this.adaptive.persisted();
  }

  /** Adaptive loops go on from another controller's state instead of initial_limit; returns their limits. */
  restoreAdaptive(states: Readonly<Record<string, PersistedAdaptive>>): Record<string, number> {
    return this.adaptive.restore(states);
  }

  /** Limits, balances, queues, counters, classes and observed rates of every throttler. */
  snapshot(filter?: DescribeThrottlersFilter): ControllerSnapshot {
    const now = this.clock.now();
    const rates = this.drivers.grantedRates;
    const throttlers = [...this.drivers.all()].map((driver): ControllerThrottlerSnapshot => {
      const bucket = driver.snapshot();
      rates.sample(bucket, now);
      const adaptive = this.adaptive.snapshot(bucket.id);
      const concurrency = this.leases.snapshot(bucket.id);
      const keyed = this.keyed.snapshot(bucket.id);
      return {
        ...bucket,
        grantedRate: rates.rate(bucket.id, now),
        classes: bucket.classes.map((c) => ({ ...c, grantedRate: rates.rate(bucket.id, now, c.id) })),
        ...(adaptive ? { adaptive } : {}),
        ...(concurrency ? { concurrency } : {}),
        ...(keyed ? { keyed } : {}),
      };
    });
    const snapshot = { version: this.currentVersion, generatedAt: new Date(now).toISOString(), throttlers, alignment: this.alignment.snapshot() };
    return filter ? describedFor(snapshot, filter, (id, key) => this.keyed.describeKey(id, key)) : snapshot;
  }

  /**
   * Fails every waiting request with CONTROLLER_UNAVAILABLE (its client retries against the
   * restarted controller), ends every watch stream the same way, and refuses later calls. Idempotent.
   * `reason` replaces that error (a failover leader stepping down names why and who leads).
   */
  close(reason?: SluiceError): void {
    if (this.closedWith) return;
    const error = reason ?? new SluiceError("CONTROLLER_UNAVAILABLE", "the controller is shutting down; retry against the restarted controller");
    this.closedWith = error;
    this.sampling.abort();
    this.adaptive.close();
    this.leases.close();
    this.keyed.close(error);
    this.drivers.close(error);
    this.watchers.endAll(error);
  }

  /** Applies a validated spec in one synchronous step, so no call ever sees half of it. */
  private apply(next: DynamicSpec): void {
    const version = this.currentVersion + 1;
    for (const id of Object.keys(this.spec.throttlers)) {
      if (ownEntry(next.throttlers, id)?.kind !== "concurrency") this.leases.forget(id);
    }
    const nextConfigs = new Map<string, QuotaBucketConfig>();
    for (const [id, throttler] of Object.entries(next.throttlers)) nextConfigs.set(id, this.configOf(id, throttler));

    const { added, removed, changed } = this.drivers.sync(nextConfigs, version);
    this.spec = next;
    this.currentVersion = version;
    this.adaptive.sync(next.throttlers);
    this.keyed.sync(next.throttlers, version, (id) => this.adaptiveLimitOf(id));

    const size = this.drivers.size;
    const count = `${size} ${size === 1 ? "throttler" : "throttlers"}`;
    const parts = [`dynamic_spec version ${version} applied: ${count}${size > 0 ? ` (${this.describeLimits()})` : ""}`];
    if (added.length > 0) parts.push(`added ${added.join(", ")}`);
    if (removed.length > 0) parts.push(`removed ${removed.join(", ")}`);
    if (changed.length > 0) parts.push(`changed ${changed.join(", ")}`);
    this.log(parts.join("; "));

    this.watchers.notifyAll(this.currentUpdate());
  }

  /** The bucket config of a throttler; an adaptive one runs at the limit its loop keeps in force. */
  private configOf(id: string, throttler: ThrottlerSpec): QuotaBucketConfig {
    const config = bucketConfigOf(throttler, this.detachedGraceMs);
    const adaptiveLimit = this.adaptive.limitFor(id, throttler);
    return adaptiveLimit === null ? config : { ...config, limit: adaptiveLimit };
  }

  /** The limit an adaptive throttler's loop keeps in force now; null for a fixed limit. */
  private adaptiveLimitOf(id: string): number | null {
    const throttler = ownEntry(this.spec.throttlers, id);
    return throttler ? this.adaptive.limitFor(id, throttler) : null;
  }

  private driverFor(throttlerId: string): QuotaBucketDriver {
    this.throwIfClosed();
    return this.drivers.driverFor(throttlerId, this.currentVersion);
  }

  /** The class a request is served in: its own if declared on the throttler, else `default` (docs/design.md §9.2). */
  private classIdOf(call: Pick<RequestQuotaCall, "throttlerId" | "quotaClassId">): string {
    if (call.quotaClassId === "") return DEFAULT_CLASS_ID; // most calls: no lookup
    const classes = ownEntry(this.spec.throttlers, call.throttlerId)?.classes;
    return classes !== undefined && Object.hasOwn(classes, call.quotaClassId) ? call.quotaClassId : DEFAULT_CLASS_ID;
  }

  private throwIfClosed(): void {
    if (this.closedWith) throw this.closedWith;
  }

  private currentUpdate(): DynamicSpecUpdate {
    if (this.latestUpdate?.version !== this.currentVersion) {
      this.latestUpdate = { version: this.currentVersion, dynamicSpecJson: JSON.stringify(this.spec) };
    }
    return this.latestUpdate;
  }
}
