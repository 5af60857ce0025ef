import { SluiceError, type Clock } from "@sluice/core";
import type { CallContext, ReleaseQuotaCall, RequestQuotaCall, RequestQuotaResult } from "@sluice/protocol";
import type { PersistedLeases } from "@sluice/failover-ports";
import { keyProblem, MAX_KEY_BYTES, type KeyedSpec, type ThrottlerSpec } from "@sluice/spec";
import { bucketRequestNow } from "../bucket-request.ts";
import { checkReleaseAmount, refuseNeverFitting } from "../concurrency/concurrency-admission.ts";
import { ConcurrencyLeases } from "../concurrency/concurrency-leases.ts";
import { removedError } from "../removed-throttlers.ts";
import type { BucketBalance } from "../controller-snapshot.ts";
import { KeyedThrottler, type KeyDescription, type KeyedSnapshot, type KeyedUsage } from "./keyed-throttler.ts";

// The controller's keyed throttlers (docs/design.md §11.4), beside its ordinary ones: each keyed throttler's
// keys, and for a concurrency template the leases of every key (one lease table per throttler,
// whose "throttler ids" are its keys, so renewing a throttler renews every key its client holds).

/** How often idle keys are parked or forgotten: a key is forgotten at most this late after idle_timeout. */
export const KEY_SWEEP_MS = 1_000;

type KeyedThrottlerSpec = ThrottlerSpec & { keyed: KeyedSpec };

/** What one key of a keyed throttler persists: a rate key's balance, or a concurrency key's leases. */
export type PersistedKeyState =
  | { readonly balance: BucketBalance; readonly leases?: undefined }
  | { readonly leases: PersistedLeases; readonly balance?: undefined };

export function isKeyed(throttler: ThrottlerSpec | undefined): throttler is KeyedThrottlerSpec {
  return throttler?.keyed !== undefined;
}

/** A key on a call to a throttler that is not keyed: the caller means another throttler, or forgot `keyed`. */
export function notKeyedError(throttlerId: string): SluiceError {
  return new SluiceError(
    "INVALID_REQUEST",
    `throttler ${JSON.stringify(throttlerId)} is not keyed, so a request for it cannot name a key; ` +
      `add "keyed": {} to the throttler in dynamic_spec, or call it without forKey`,
    { throttlerId },
  );
}

export interface KeyedThrottlersOptions {
  readonly clock: Clock;
  readonly log: (line: string) => void;
  readonly detachedGraceMs: number;
  /** A key's lease ended or a silent holder's persisted silence grew (a failover leader persists then). */
  readonly leasesChanged?: (() => void) | undefined;
}

export class KeyedThrottlers {
  private readonly throttlers = new Map<string, KeyedThrottler>();
  private readonly leases = new Map<string, ConcurrencyLeases>();
  private readonly stopping = new AbortController();

  constructor(private readonly options: KeyedThrottlersOptions) {
    void this.sweepLoop();
  }

  get(id: string): KeyedThrottler | undefined {
    return this.throttlers.get(id);
  }

  /** Takes a new dynamic_spec: keyed throttlers added, removed (their waiters hear THROTTLER_REMOVED) or reconfigured. */
  sync(throttlers: Readonly<Record<string, ThrottlerSpec>>, version: number, adaptiveLimitOf: (id: string) => number | null): void {
    for (const [id, keyed] of this.throttlers) {
      const next = Object.hasOwn(throttlers, id) ? throttlers[id] : undefined;
      if (isKeyed(next) && next.kind === (this.leases.has(id) ? "concurrency" : "rate")) continue;
      keyed.close(removedError(id, version, version));
      this.throttlers.delete(id);
      this.leases.get(id)?.close();
      this.leases.delete(id);
    }
    for (const [id, throttler] of Object.entries(throttlers)) {
      if (!isKeyed(throttler)) continue;
      const existing = this.throttlers.get(id);
      if (existing) {
        existing.reconfigure(throttler, adaptiveLimitOf(id));
        this.leases.get(id)?.leaseTimesChanged();
        continue;
      }
      const keyed = new KeyedThrottler(id, throttler, this.options.clock, this.options.detachedGraceMs, adaptiveLimitOf(id));
      this.throttlers.set(id, keyed);
      if (throttler.kind === "concurrency") this.leases.set(id, this.leasesFor(id, keyed));
    }
  }

  acquire(throttler: KeyedThrottlerSpec, call: RequestQuotaCall, context: CallContext): RequestQuotaResult | Promise<RequestQuotaResult> {
    const keyed = this.throttlers.get(call.throttlerId);
    const key = this.checkedKey(call.throttlerId, call.key);
    if (!keyed) return Promise.reject(new SluiceError("UNKNOWN_THROTTLER", `keyed throttler ${JSON.stringify(call.throttlerId)} is not ready`));
    const leases = this.leases.get(call.throttlerId);
    if (leases) {
      const classId = keyed.classIdOf(key, call.quotaClassId);
      refuseNeverFitting(call, { ...throttler, ...keyOverrideLimit(keyed, key) });
      // The lease table of a keyed throttler is by key: renewing the throttler renews every key.
      return keyed.acquire(key, (driver) => leases.acquire(driver, { ...call, throttlerId: key }, context, classId));
    }
    return keyed.acquireFromBucket(key, bucketRequestNow(call, context));
  }

  release(call: ReleaseQuotaCall): void {
    const key = this.checkedKey(call.throttlerId, call.key);
    const keyed = this.throttlers.get(call.throttlerId);
    const leases = this.leases.get(call.throttlerId);
    if (leases && keyed) {
      checkReleaseAmount(call);
      leases.released(key, call.clientId, keyed.classIdOf(key, call.quotaClassId), call.amount);
      return;
    }
    keyed?.activeDriver(key)?.release(call.amount, call.quotaClassId);
  }

  /** Renews every key `clientId` holds on the keyed concurrency throttlers named; returns the units. */
  renew(clientId: string, throttlerIds: readonly string[], key = ""): number {
    let held = 0;
    for (const id of throttlerIds) {
      const leases = this.leases.get(id);
      if (leases) held += leases.renew(clientId, key === "" ? leases.heldIds() : [key]);
    }
    return held;
  }

  /** What the adaptive loop of keyed throttler `id` sees of its keys (KeyedThrottler.adaptiveUsage); undefined when not keyed. */
  adaptiveUsage(id: string, elapsedMs: number): KeyedUsage | undefined {
    return this.throttlers.get(id)?.adaptiveUsage(elapsedMs);
  }

  setAdaptiveLimit(id: string, limit: number): void {
    this.throttlers.get(id)?.setAdaptiveLimit(limit);
  }

  /** One key's figures (DescribeThrottlers for a key); undefined when `id` is not a keyed throttler here. */
  describeKey(id: string, key: string): KeyDescription | undefined {
    const keyed = this.throttlers.get(id);
    return keyed?.describeKey(this.checkedKey(id, key));
  }

  snapshot(id: string): KeyedSnapshot | undefined {
    return this.throttlers.get(id)?.snapshot();
  }

  /**
   * Every keyed concurrency throttler's leases by key (keys with units held or request ids to
   * answer again), for a successor: one record per key, as for a throttler (docs/design.md §5.3).
   */
  leaseState(): Map<string, Record<string, PersistedLeases>> {
    const out = new Map<string, Record<string, PersistedLeases>>();
    for (const [id, leases] of this.leases) out.set(id, leases.persisted());
    return out;
  }

  /**
   * A predecessor's leases of a keyed concurrency throttler, by key: their units count as in use
   * in each key's bucket at once (past max_keys too: held units are never dropped). Returns the units.
   */
  restoreLeases(throttlerId: string, byKey: Readonly<Record<string, PersistedLeases>>): number | null {
    const leases = this.leases.get(throttlerId);
    if (!leases) return null;
    return Object.values(leases.restore(byKey)).reduce((sum, units) => sum + units, 0);
  }

  /** Renewals that ended a persisted silence, over every keyed throttler (see ConcurrencyLeases.silencesEnded). */
  get silencesEnded(): number {
    let ended = 0;
    for (const leases of this.leases.values()) ended += leases.silencesEnded;
    return ended;
  }

  /** Every keyed throttler's limited keys and their balances now, for a successor (docs/design.md §5.3). */
  balances(): Map<string, Map<string, BucketBalance>> {
    const out = new Map<string, Map<string, BucketBalance>>();
    for (const [id, keyed] of this.throttlers) out.set(id, keyed.balances());
    return out;
  }

  /**
   * For a failover leader's next write (docs/design.md §5.3): per keyed throttler, the keys whose
   * record may differ from the one worked out last (their balance, or a concurrency key's leases),
   * or null for every key of it (the first call for it, a reconfiguration). The leader then looks
   * at those keys only (keyState), or at every key (keyStates).
   */
  changedKeys(): Map<string, ReadonlySet<string> | null> {
    const out = new Map<string, ReadonlySet<string> | null>();
    const now = this.options.clock.now();
    for (const [id, keyed] of this.throttlers) {
      const keys = keyed.takeChangedKeys();
      const leases = this.leases.get(id);
      // A concurrency key persists its leases only: its bucket's balance is what they hold.
      if (!leases) out.set(id, keys);
      else {
        const leased = leases.takeChanged(now);
        out.set(id, keys === null ? null : leased);
      }
    }
    return out;
  }

  /** What key `key` of keyed throttler `id` persists now: a rate key's balance, a concurrency key's leases; undefined for nothing. */
  keyState(id: string, key: string): PersistedKeyState | undefined {
    const leases = this.leases.get(id);
    if (leases) {
      const held = leases.persistedOf(key, this.options.clock.now());
      return held ? { leases: held } : undefined;
    }
    const balance = this.throttlers.get(id)?.balanceOf(key);
    return balance ? { balance } : undefined;
  }

  /** keyState of every key of `id` that has one (balances() and leaseState() of one throttler). */
  keyStates(id: string): Map<string, PersistedKeyState> {
    const out = new Map<string, PersistedKeyState>();
    const leases = this.leases.get(id);
    if (leases) for (const [key, held] of Object.entries(leases.persisted())) out.set(key, { leases: held });
    else for (const [key, balance] of this.throttlers.get(id)?.balances() ?? []) out.set(key, { balance });
    return out;
  }

  close(error: SluiceError): void {
    this.stopping.abort();
    for (const keyed of this.throttlers.values()) keyed.close(error);
    for (const leases of this.leases.values()) leases.close();
  }

  /** The key of a call to a keyed throttler: present, at most 256 UTF-8 bytes. */
  private checkedKey(throttlerId: string, key: string | undefined): string {
    // A UTF-16 unit is at most 3 UTF-8 bytes: a short key needs no byte count.
    if (key !== undefined && key !== "" && key.length * 3 <= MAX_KEY_BYTES) return key;
    const problem = keyProblem(key ?? "");
    if (problem === null) return key ?? "";
    const hint = key === undefined || key === "" ? `throttler ${JSON.stringify(throttlerId)} is keyed: call it through forKey(key); ` : "";
    throw new SluiceError("INVALID_REQUEST", `${hint}${problem} (throttler ${JSON.stringify(throttlerId)})`, {
      throttlerId,
      keyBytes: Buffer.byteLength(key ?? "", "utf8"),
      maxKeyBytes: MAX_KEY_BYTES,
    });
  }

  private leasesFor(id: string, keyed: KeyedThrottler): ConcurrencyLeases {
    return new ConcurrencyLeases({
      clock: this.options.clock,
      log: (line) => this.options.log(line.replace(/^concurrency /, `concurrency ${id} key `)),
      leaseMsOf: (key) => keyed.leaseTimeoutFor(key),
      releaseUnits: (key, amount, classId) => keyed.activeDriver(key)?.release(amount, classId),
      holdUnits: (key, amount, classId) => keyed.driverFor(key, { restoring: true }).holdRestoredUnits(amount, classId),
      rememberMs: this.options.detachedGraceMs,
      ...(this.options.leasesChanged ? { persistedChanged: this.options.leasesChanged } : {}),
    });
  }

  private async sweepLoop(): Promise<void> {
    const signal = this.stopping.signal;
    while (!signal.aborted) {
      try {
        await this.options.clock.sleep(KEY_SWEEP_MS, signal);
      } catch {
        return;
      }
      for (const keyed of this.throttlers.values()) keyed.sweep();
    }
  }
}

function keyOverrideLimit(keyed: KeyedThrottler, key: string): { limit: number | null } {
  return { limit: keyed.configFor(key).limit };
}
