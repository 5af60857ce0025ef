import {
  REQUEST_IDS_PER_QUEUE_SLOT,
  RememberedGrants,
  SluiceError,
  type AcquireRequest,
  type Clock,
  type Grant,
  type QuotaBucketConfig,
  type QuotaBucketDriver,
} from "@sluice/core";
import { DEFAULT_CLASS_ID, THROTTLER_DEFAULTS, keyOverrideOf, keyThrottlerSpec, type KeyedSpec, type ThrottlerSpec } from "@sluice/spec";
import { bucketConfigOf } from "../bucket-config.ts";
import type { BucketBalance } from "../controller-snapshot.ts";
import { ChangedIds } from "../changed-ids.ts";
import { ActiveKey } from "./active-key.ts";
import { KeyWaits } from "./key-waits.ts";
import type { KeyDescription, KeyedSnapshot } from "./keyed-snapshot.ts";
import { ParkedKey, parkedBalanceAt } from "./parked-key.ts";

export type { KeyDescription, KeyedSnapshot } from "./keyed-snapshot.ts";

// One keyed throttler (docs/design.md §11.4): a bucket per key, created on the key's first request with the
// template's fields and the key's override on top. Keys with no request for a while are parked
// (parked-key.ts); keys idle for `idle_timeout` are forgotten only when forgetting grants nothing.

/** At least this long without a request before a key's bucket is parked: longer than the top-keys window. */
export const MIN_PARK_AFTER_MS = 60_000;

/** What the template's adaptive loop sees of the keys over one interval (adaptiveUsage). */
export interface KeyedUsage {
  /** The busiest key's use: units/s granted net of releases (rate), units in use now (concurrency). */
  readonly use: number;
  /** Whether a key has a request waiting now. */
  readonly queued: boolean;
}

/**
 * A key is kept for as long as it is remembered (hours, parked): kept as one flat string, never as
 * the string the call brought, which may be a concatenation still holding its parts (a key built
 * with a template literal in process). Exact for any string: UTF-16 code units round-trip.
 */
function flatCopyOf(key: string): string {
  return Buffer.from(key, "utf16le").toString("utf16le");
}

/** The rate a config grants (units/s), null when unlimited. */
function rateOf(config: QuotaBucketConfig): number | null {
  if (config.useClassWeightsAsLimit) return Object.values(config.classWeights).reduce((sum, w) => sum + w, 0);
  return config.limit;
}

/** What an unkeyed throttler of the default max_queue_size remembers: the most a keyed one keeps for its keys together. */
const DEFAULT_IDS_BOUND = THROTTLER_DEFAULTS.max_queue_size * REQUEST_IDS_PER_QUEUE_SLOT;

export class KeyedThrottler {
  private readonly active = new Map<string, ActiveKey>();
  private readonly parked = new Map<string, ParkedKey>();
  /**
   * The granted request ids of every key, each hashed with its key: one table for the throttler,
   * which outlives a key's bucket, so a retry of a lost answer is answered with its grant even
   * after its key was parked or forgotten. Its bound is a key's share (100 × the key's
   * max_queue_size) times the keys in use, up to an unkeyed throttler's default bound (1,000,000
   * ids, ~50 MB), and never below one key's share: many keys with a small max_queue_size do not
   * push each other's ids out early, and 10,000 busy keys do not hold 10,000 shares.
   */
  private readonly grants = new RememberedGrants();
  private readonly idsBound = (keyBound: number): number => Math.max(keyBound, Math.min(keyBound * this.active.size, DEFAULT_IDS_BOUND));
  private readonly waits: KeyWaits;
  /** Keys whose persisted record may have changed since a failover leader last looked (changed-ids.ts). */
  private readonly changes = new ChangedIds();
  private template: ThrottlerSpec;
  private keyed: KeyedSpec;
  private templateConfig: QuotaBucketConfig;
  private refused = 0;
  private forgotten = 0;
  private nextParkedScanAt = 0;
  private closedWith: SluiceError | null = null;

  constructor(
    readonly id: string,
    template: ThrottlerSpec & { keyed: KeyedSpec },
    private readonly clock: Clock,
    private readonly detachedGraceMs: number,
    /** The limit the template's adaptive loop keeps in force, if any. */
    private adaptiveLimit: number | null = null,
  ) {
    this.template = template;
    this.keyed = template.keyed;
    this.templateConfig = this.configFor("");
    this.waits = new KeyWaits(clock);
  }

  get keyCount(): number {
    return this.active.size + this.parked.size;
  }

  /** The bucket config of `key`: the template with the key's override on top. */
  configFor(key: string): QuotaBucketConfig {
    const override = key === "" ? undefined : keyOverrideOf(this.keyed, key);
    const config = bucketConfigOf(key === "" ? this.template : keyThrottlerSpec(this.template, key), this.detachedGraceMs);
    const limit = override?.limit === undefined && this.adaptiveLimit !== null ? this.adaptiveLimit : config.limit;
    return limit === config.limit ? config : { ...config, limit };
  }

  /**
   * configFor(key) for a bucket to keep: a key without an override shares the template's config,
   * worked out once (one object for every such key, not one each, and a cache line warm for all).
   */
  private bucketConfigFor(key: string): QuotaBucketConfig {
    return keyOverrideOf(this.keyed, key) === undefined ? this.templateConfig : this.configFor(key);
  }

  /** The class a request of `key` is served in: its own if the key's classes declare it, else the default. */
  classIdOf(key: string, quotaClassId: string): string {
    return quotaClassId !== "" && Object.hasOwn(this.configFor(key).classWeights, quotaClassId) ? quotaClassId : DEFAULT_CLASS_ID;
  }

  /** lease_timeout of `key` (a concurrency template), null for a rate template. */
  leaseTimeoutFor(key: string): number | null {
    if (this.template.kind !== "concurrency") return null;
    return keyOverrideOf(this.keyed, key)?.lease_timeout ?? this.template.lease_timeout;
  }

  /**
   * The key's bucket, brought back from parking or created; TOO_MANY_KEYS past max_keys, unless
   * `restoring` a predecessor's held units (never dropped, as a debt is not).
   */
  driverFor(key: string, { restoring = false } = {}): QuotaBucketDriver {
    return this.entryFor(key, restoring);
  }

  /** driverFor's work, returning the key's entry (its last request now) rather than only its bucket. */
  private entryFor(key: string, restoring = false): ActiveKey {
    if (this.closedWith) throw this.closedWith;
    const now = this.clock.now();
    const active = this.active.get(key);
    if (active) {
      active.lastRequestAt = now;
      this.changes.mark(key);
      return active;
    }
    const parked = this.parked.get(key);
    if (!parked && !restoring && this.keyCount >= this.keyed.max_keys) {
      this.refused++;
      throw new SluiceError(
        "TOO_MANY_KEYS",
        `keyed throttler ${JSON.stringify(this.id)} already holds ${this.keyCount} keys, its max_keys of ${this.keyed.max_keys}; ` +
          `key ${JSON.stringify(key.slice(0, 64))} is refused (no live key is dropped for it). Keys idle for idle_timeout ` +
          `(${this.keyed.idle_timeout}ms) with a full bucket are forgotten and make room; or raise keyed.max_keys`,
        { throttlerId: this.id, key, keys: this.keyCount, maxKeys: this.keyed.max_keys },
      );
    }
    const flat = flatCopyOf(key);
    const entry = new ActiveKey(this.id, this.bucketConfigFor(key), this.clock, this.grants.scoped(flat, this.idsBound), now);
    if (parked) {
      this.parked.delete(key);
      if (!Number.isNaN(parked.balance)) entry.restoreBalance(parked.balance, parked.atMs);
    }
    this.active.set(flat, entry);
    this.changes.mark(flat);
    return entry;
  }

  /**
   * One request on `key`'s bucket, made by `run` (the bucket itself, or a concurrency lease around
   * it); its wait counts toward the key's place among the top keys, whether it ended in a grant or
   * not (timed out, past its deadline, cancelled): a key whose every request times out is the one
   * an operator looks for. Each attempt counts its own time only: a request that timed out keeps its
   * place, and the grant of its retry under the same request id (or a re-answer of a grant from the
   * bucket's memory) reports the wait since the request's first arrival, part of which an earlier
   * attempt counted already.
   */
  acquire<T extends { readonly waitedMs: number }>(key: string, run: (driver: QuotaBucketDriver) => T | Promise<T>): T | Promise<T> {
    const entry = this.entryFor(key);
    return this.tracked(key, entry, run(entry));
  }

  /** acquire() straight on the key's bucket (a rate template): no function made per request. */
  acquireFromBucket(key: string, request: AcquireRequest): Grant | Promise<Grant> {
    const entry = this.entryFor(key);
    return this.tracked(key, entry, entry.acquireNow(request));
  }

  /** Keeps the key from being parked while `settled` is pending, and counts its wait toward the top keys. */
  private tracked<T extends { readonly waitedMs: number }>(key: string, entry: ActiveKey, settled: T | Promise<T>): T | Promise<T> {
    // Answered at once (the bucket had quota and nobody waited): it waited 0 ms, nothing to count.
    if (!(settled instanceof Promise)) return settled;
    const startedAt = entry.lastRequestAt;
    entry.inFlight++;
    return settled.then(
      (grant) => {
        entry.inFlight--;
        this.changes.mark(key);
        // The bucket's figure leaves out what `run` adds around the wait (a lease's commit to Kafka).
        const waitedMs = Math.min(grant.waitedMs, this.clock.now() - startedAt);
        if (waitedMs > 0) this.waits.add(key, waitedMs);
        return grant;
      },
      (error: unknown) => {
        entry.inFlight--;
        this.changes.mark(key);
        const waitedMs = this.clock.now() - startedAt;
        if (waitedMs > 0) this.waits.add(key, waitedMs);
        throw error;
      },
    );
  }

  /** The active bucket of a key, if it has one (releases and lease expiries: the caller changes its balance). */
  activeDriver(key: string): QuotaBucketDriver | undefined {
    const entry = this.active.get(key);
    if (entry) this.changes.mark(key);
    return entry;
  }

  /** A new template or new overrides: every key's bucket takes its new config at once. */
  reconfigure(template: ThrottlerSpec & { keyed: KeyedSpec }, adaptiveLimit: number | null): void {
    this.template = template;
    this.keyed = template.keyed;
    this.adaptiveLimit = adaptiveLimit;
    this.templateConfig = this.configFor("");
    for (const [key, entry] of this.active) entry.reconfigure(this.bucketConfigFor(key));
    // Every key's rate or capacity may be another now, parked ones' too.
    this.changes.markAll();
  }

  /** The adaptive loop of the template moved the limit: keys without a limit of their own follow it. */
  setAdaptiveLimit(limit: number): void {
    if (this.adaptiveLimit === limit) return;
    this.reconfigure(this.template as ThrottlerSpec & { keyed: KeyedSpec }, limit);
  }

  /**
   * The use the template's one adaptive loop sees (docs/design.md §11.4): the busiest key's (an
   * override cannot set a limit under an adaptive template, so every key follows the loop). The
   * limit the loop moves is each key's, so the use it is compared with is one key's too: the sum
   * over keys would let every key's limit climb with the number of keys, far above what any key
   * uses. Measured since the last call, `elapsedMs` ago; a key parked meanwhile had no request for
   * over a minute, so it used nothing in the interval.
   */
  adaptiveUsage(elapsedMs: number): KeyedUsage {
    let use = 0;
    let queued = false;
    const concurrency = this.template.kind === "concurrency";
    for (const entry of this.active.values()) {
      const bucket = entry.snapshot();
      const net = bucket.counters.granted - bucket.counters.released;
      const delta = net - entry.measuredNet;
      entry.measuredNet = net;
      if (bucket.pendingRequests > 0) queued = true;
      const keyUse = concurrency ? (bucket.inUse ?? 0) : elapsedMs > 0 ? Math.max(0, delta) / (elapsedMs / 1000) : 0;
      if (keyUse > use) use = keyUse;
    }
    return { use, queued };
  }

  /**
   * Parks keys quiet for long enough and forgets keys idle for idle_timeout whose forgetting grants
   * nothing: a full bucket, nothing held, nobody waiting. Returns the keys forgotten.
   */
  sweep(): number {
    const now = this.clock.now();
    const parkAfterMs = Math.max(MIN_PARK_AFTER_MS, this.detachedGraceMs, this.templateConfig.periodMs, this.templateConfig.requestPeriodMs);
    const idleMs = this.keyed.idle_timeout;
    let forgotten = 0;
    for (const [key, entry] of this.active) {
      const quietMs = now - entry.lastRequestAt;
      if (entry.inFlight > 0 || quietMs < Math.min(parkAfterMs, idleMs)) continue;
      const bucket = entry.snapshot();
      if (bucket.pendingRequests > 0 || bucket.detachedRequests > 0 || (bucket.inUse ?? 0) > 0) continue;
      const full = bucket.balance === null || bucket.capacity === null || bucket.balance >= bucket.capacity;
      // Never before the grace of its granted request ids ends either (they are in the throttler's
      // table, which answers a late retry of a lost answer whether the key is active, parked or gone).
      if (quietMs >= Math.max(idleMs, this.detachedGraceMs) && full) {
        this.active.delete(key);
        this.changes.mark(key);
        forgotten++;
      } else if (quietMs >= parkAfterMs) {
        this.active.delete(key);
        this.changes.mark(key);
        this.parked.set(key, new ParkedKey(bucket.balance ?? Number.NaN, now, entry.lastRequestAt));
      }
    }
    // Parked keys are many and change only by accrual: scanned about ten times per idle_timeout, so a
    // key is forgotten at most a tenth of idle_timeout late and 100,000 of them cost little.
    const scanParked = now >= this.nextParkedScanAt;
    if (scanParked) this.nextParkedScanAt = now + idleMs / 10;
    for (const [key, parked] of scanParked ? this.parked : []) {
      if (now - parked.lastRequestAt < idleMs) continue;
      const config = this.configFor(key);
      const rate = rateOf(config);
      const capacity = rate === null ? null : (rate * config.periodMs) / 1000;
      if (capacity !== null && parkedBalanceAt(parked, now, rate, capacity) < capacity) continue;
      this.parked.delete(key);
      this.changes.mark(key);
      forgotten++;
    }
    this.forgotten += forgotten;
    this.waits.forgetOld();
    return forgotten;
  }

  /**
   * Balances of every limited key now (active and parked), for a failover successor, with the rate
   * each refills at and its capacity: a parked key's balance is as of when it was parked.
   */
  balances(): Map<string, BucketBalance> {
    const out = new Map<string, BucketBalance>();
    // A concurrency key's "balance" is its free units: a successor has them from the key's leases
    // (persisted per key with its holders), so writing them too would only rewrite records per grant.
    if (this.template.kind === "concurrency") return out;
    const now = this.clock.now();
    for (const key of this.active.keys()) {
      const balance = this.balanceOf(key, now);
      if (balance) out.set(key, balance);
    }
    for (const key of this.parked.keys()) {
      const balance = this.balanceOf(key, now);
      if (balance) out.set(key, balance);
    }
    return out;
  }

  /** balances()'s entry of one key: undefined when it has none (unlimited, not remembered, a concurrency key). */
  balanceOf(key: string, now = this.clock.now()): BucketBalance | undefined {
    if (this.template.kind === "concurrency") return undefined;
    const entry = this.active.get(key);
    if (entry) {
      const { balance, limit, capacity } = entry.snapshot();
      return balance !== null && Number.isFinite(balance) ? { balance, atMs: now, limitPerSecond: limit, capacity } : undefined;
    }
    const parked = this.parked.get(key);
    if (!parked || Number.isNaN(parked.balance)) return undefined;
    // Most keys have no override: the template's config, worked out once, is theirs.
    const config = keyOverrideOf(this.keyed, key) === undefined ? this.templateConfig : this.configFor(key);
    const rate = rateOf(config);
    return { balance: parked.balance, atMs: parked.atMs, limitPerSecond: rate, capacity: rate === null ? null : (rate * config.periodMs) / 1000 };
  }

  /**
   * The keys whose balance may have changed since the last call (null: every key), for a failover
   * leader's next write (changed-ids.ts). A key with a request waiting is answered again each
   * time until it has none: its bucket may grant a waiting request in chunks on a timer, taking
   * from the balance before the request is answered (which marks the key). A detached request was
   * refunded when it was (its caller hears of it, which marks the key) and takes nothing until a
   * retry brings it back.
   */
  takeChangedKeys(): ReadonlySet<string> | null {
    return this.changes.take(
      (key) => {
        const entry = this.active.get(key);
        return entry !== undefined && entry.inFlight > 0;
      },
      () => this.active.keys(),
    );
  }

  /** A predecessor's balance of `key` (failover): the key continues from it, parked until its next request. */
  restoreBalance(key: string, balance: number, atMs: number): void {
    this.changes.mark(key);
    const active = this.active.get(key);
    if (active) {
      active.restoreBalance(balance, atMs);
      return;
    }
    // Restored even past max_keys (lowered since the record was written): a debt is never dropped.
    this.parked.set(key, new ParkedKey(balance, Math.min(atMs, this.clock.now()), this.clock.now()));
  }

  describeKey(key: string): KeyDescription {
    const now = this.clock.now();
    const config = this.configFor(key);
    const rate = rateOf(config);
    const capacity = rate === null ? null : (rate * config.periodMs) / 1000;
    const waitedMs = this.waits.top(Number.MAX_SAFE_INTEGER).find((top) => top.key === key)?.waitedMs ?? 0;
    const base = { key, override: keyOverrideOf(this.keyed, key) !== undefined, limit: config.limit, periodMs: config.periodMs, waitedMs };
    const active = this.active.get(key);
    if (active) {
      const bucket = active.snapshot();
      const idleMs = now - active.lastRequestAt;
      return {
        ...base,
        state: "active",
        balance: bucket.balance,
        capacity: bucket.capacity,
        pendingRequests: bucket.pendingRequests,
        inUse: bucket.inUse ?? null,
        idleMs,
      };
    }
    const parked = this.parked.get(key);
    if (parked) {
      const balance = parkedBalanceAt(parked, now, rate, capacity);
      return {
        ...base,
        state: "parked",
        balance: Number.isFinite(balance) ? balance : null,
        capacity,
        pendingRequests: 0,
        inUse: null,
        idleMs: now - parked.lastRequestAt,
      };
    }
    return { ...base, state: "new", balance: capacity, capacity, pendingRequests: 0, inUse: null, idleMs: null };
  }

  snapshot(): KeyedSnapshot {
    const top = this.waits.top(this.keyed.top_keys).map(({ key, waitedMs }) => {
      const active = this.active.get(key);
      const bucket = active?.snapshot();
      const parked = this.parked.get(key);
      return {
        key,
        waitedMs,
        balance: bucket?.balance ?? (parked && !Number.isNaN(parked.balance) ? parked.balance : null),
        pendingRequests: bucket?.pendingRequests ?? 0,
      };
    });
    return {
      maxKeys: this.keyed.max_keys,
      idleTimeoutMs: this.keyed.idle_timeout,
      keys: this.keyCount,
      activeKeys: this.active.size,
      refusedKeys: this.refused,
      forgottenKeys: this.forgotten,
      topKeys: top,
    };
  }

  /** Fails every waiter of every key with `error`; later requests too. Idempotent. */
  close(error: SluiceError): void {
    if (this.closedWith) return;
    this.closedWith = error;
    for (const entry of this.active.values()) entry.close(error);
  }
}
