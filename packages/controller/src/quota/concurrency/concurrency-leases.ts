import type { Clock, QuotaBucketDriver } from "@sluice/core";
import type { CallContext, RequestQuotaCall, RequestQuotaResult } from "@sluice/protocol";
import { bucketRequestOf } from "../bucket-request.ts";
import { ChangedIds } from "../changed-ids.ts";
import { GrantedRequestIds } from "./granted-request-ids.ts";
import { LeaseTable } from "./lease-table.ts";
import { PERSISTED_REQUEST_IDS_MAX, type PersistedLeases } from "@sluice/failover-ports";

/** How often ended leases are looked for: a holder's units come back at most this late after lease_timeout. */
export const LEASE_SWEEP_MS = 250;

/** What DescribeThrottlers, /metrics and `sluice top` show of a concurrency throttler's holders. */
export interface ConcurrencySnapshot {
  readonly leaseTimeoutMs: number;
  /** Clients holding units now. */
  readonly holders: number;
  /** Units the lease table counts as held (equals the bucket's inUse unless a release is in flight). */
  readonly heldUnits: number;
  /** Leases that ended without renewal (their holder stopped renewing: crashed or cut off). */
  readonly expiredLeases: number;
  /** Units given back by those leases. */
  readonly expiredUnits: number;
}

export interface ConcurrencyLeasesOptions {
  readonly clock: Clock;
  readonly log: (line: string) => void;
  /** lease_timeout of a concurrency throttler, null when the id is not one (now). */
  readonly leaseMsOf: (throttlerId: string) => number | null;
  /** Gives units back to a throttler's bucket. */
  readonly releaseUnits: (throttlerId: string, amount: number, classId: string) => void;
  /** Counts units a predecessor leased out as in use in a throttler's bucket (failover, docs/design.md §5.2). */
  readonly holdUnits: (throttlerId: string, amount: number, classId: string) => void;
  /** How long a granted request id is answered again rather than granted again: at least the bucket's detachedGraceMs. */
  readonly rememberMs: number;
  /**
   * What `persisted()` would give changed without a grant or a release: a lease ended, or a silent
   * holder's silence grew by a step. A failover leader persists then, so a successor does not give
   * those holders a longer lease than they have left.
   */
  readonly persistedChanged?: () => void;
}

/**
 * The controller's side of concurrency leases: records grants, checks releases against what each
 * holder holds, renews, and gives back the units of holders that stopped renewing.
 */
export class ConcurrencyLeases {
  private readonly table = new LeaseTable();
  /** Ids whose persisted leases may have changed since a failover leader last took them (takeChanged). */
  private readonly changes = new ChangedIds();
  private readonly requestIds = new GrantedRequestIds((id) => this.changes.mark(id));
  private readonly expired = new Map<string, { leases: number; units: number }>();
  private readonly stopping = new AbortController();
  /** Replays granted again because their lease had ended (each gets a bucket request id of its own). */
  private releasedReplays = 0;

  constructor(private readonly options: ConcurrencyLeasesOptions) {
    void this.sweep();
  }

  /** A grant from a concurrency throttler's bucket, leased to its client until released or not renewed (docs/design.md §11.2). */
  async acquire(driver: QuotaBucketDriver, call: RequestQuotaCall, context: CallContext, classId: string): Promise<RequestQuotaResult> {
    // A replayed request id is answered from its lease: the bucket would answer it too, without
    // taking units, but the lease side could not tell it from a new grant and would count it twice.
    const replay = this.replayOf(call.throttlerId, call.requestId, call.amount);
    if (replay && replay !== "lease-ended") return replay;
    // A replay whose lease ended (its units came back) leases units again: under an id of its own,
    // or the bucket would answer it from its memory of the first grant without taking any.
    const bucketCall = replay === "lease-ended" ? { ...call, requestId: `${call.requestId}\u0000lease-ended-${++this.releasedReplays}` } : call;
    const result = await driver.acquire(bucketRequestOf(bucketCall, context));
    this.granted(call.throttlerId, call.clientId, classId, { amount: result.granted, waitedMs: result.waitedMs, requestId: call.requestId });
    return result;
  }

  /**
   * The answer to a replayed request id (a client retrying after a lost answer, or after a failover):
   * the same grant, with no second lease. Undefined for a new request.
   */
  replayOf(throttlerId: string, requestId: string, amount: number): RequestQuotaResult | "lease-ended" | undefined {
    const earlier = this.requestIds.replayOf(throttlerId, requestId, amount, this.options.clock.now());
    if (!earlier) return undefined;
    // The lease that took these units ended (not renewed for lease_timeout, or everything released):
    // its units are back in the bucket, so answering the replay would hand out units nobody counts.
    if (this.table.leaseIdOf(throttlerId, earlier.clientId) !== earlier.leaseId) {
      this.requestIds.drop(throttlerId, requestId);
      return "lease-ended";
    }
    return { granted: earlier.amount, waitedMs: earlier.waitedMs };
  }

  /**
   * Leases a grant to its client. A grant of a request id already leased (two calls with one id that
   * joined in the queue and were answered together) is not leased again.
   */
  granted(throttlerId: string, clientId: string, classId: string, grant: { amount: number; waitedMs: number; requestId: string }): void {
    const leaseMs = this.options.leaseMsOf(throttlerId);
    if (leaseMs === null || grant.amount <= 0) return;
    const now = this.options.clock.now();
    const expiresAt = now + this.options.rememberMs;
    if (grant.requestId !== "" && this.requestIds.replayOf(throttlerId, grant.requestId, grant.amount, now)) return;
    const leaseId = this.table.grant(throttlerId, clientId, classId, grant.amount, now, leaseMs);
    this.changes.mark(throttlerId);
    this.requestIds.remember({ throttlerId, clientId, requestId: grant.requestId, amount: grant.amount, waitedMs: grant.waitedMs, expiresAt, leaseId }, now);
  }

  /** Gives back what `clientId` holds of `amount`; returns the units actually given back. */
  released(throttlerId: string, clientId: string, classId: string, amount: number): number {
    const released = this.table.release(throttlerId, clientId, classId, amount);
    if (released > 0) {
      this.changes.mark(throttlerId);
      this.options.releaseUnits(throttlerId, released, classId);
    }
    return released;
  }

  /**
   * Renewals that ended a holder's persisted silence: a failover leader persists before answering
   * such a renewal, or a successor would carry the silence on and end a lease that was renewed.
   */
  get silencesEnded(): number {
    return this.table.silencesEnded;
  }

  renew(clientId: string, throttlerIds: readonly string[]): number {
    return this.table.renew(
      clientId,
      throttlerIds,
      this.options.clock.now(),
      (id) => this.options.leaseMsOf(id) ?? 0,
      (id) => this.changes.mark(id),
    );
  }

  /** Ids with at least one holder (a keyed throttler's leases are by key: its keys with units held). */
  heldIds(): string[] {
    return this.table.throttlerIds();
  }

  snapshot(throttlerId: string): ConcurrencySnapshot | undefined {
    const leaseTimeoutMs = this.options.leaseMsOf(throttlerId);
    if (leaseTimeoutMs === null) return undefined;
    const { units, holders } = this.table.held(throttlerId);
    const expired = this.expired.get(throttlerId) ?? { leases: 0, units: 0 };
    return { leaseTimeoutMs, holders, heldUnits: units, expiredLeases: expired.leases, expiredUnits: expired.units };
  }

  /** The throttler is gone or no longer counts units in use: its leases end without a release. */
  forget(throttlerId: string): void {
    this.changes.mark(throttlerId);
    this.table.forget(throttlerId);
    this.requestIds.forget(throttlerId);
    this.expired.delete(throttlerId);
  }

  /** Every throttler's holders and recent request ids, for a successor (docs/design.md §5.2). */
  persisted(): Record<string, PersistedLeases> {
    const now = this.options.clock.now();
    // Built in Maps and turned into objects with Object.fromEntries (own properties): a holder or
    // throttler called "__proto__" is one like any other, where `record[id] = …` would drop it.
    const out = new Map<
      string,
      { holders: [string, Record<string, number>][]; requestIds: PersistedLeases["requestIds"][number][]; silentMs?: Map<string, number> }
    >();
    const entry = (id: string) => {
      let leases = out.get(id);
      if (!leases) out.set(id, (leases = { holders: [], requestIds: [] }));
      return leases;
    };
    for (const id of this.table.throttlerIds()) {
      const leases = entry(id);
      for (const { clientId, byClass } of this.table.holdersOf(id)) leases.holders.push([clientId, Object.fromEntries(byClass)]);
      const leaseMs = this.options.leaseMsOf(id);
      const silent = leaseMs === null ? null : this.table.silenceToPersist(id, now, leaseMs).silentMs;
      if (silent && silent.size > 0) leases.silentMs = silent;
    }
    for (const grant of this.requestIds.live(now)) {
      entry(grant.throttlerId).requestIds.push({
        requestId: grant.requestId,
        clientId: grant.clientId,
        amount: grant.amount,
        waitedMs: grant.waitedMs,
        expiresAtMs: grant.expiresAt,
      });
    }
    for (const leases of out.values()) {
      if (leases.requestIds.length > PERSISTED_REQUEST_IDS_MAX) leases.requestIds.splice(0, leases.requestIds.length - PERSISTED_REQUEST_IDS_MAX);
    }
    return Object.fromEntries(
      [...out].map(([id, leases]) => [
        id,
        {
          holders: Object.fromEntries(leases.holders),
          requestIds: leases.requestIds,
          ...(leases.silentMs ? { silentMs: Object.fromEntries(leases.silentMs) } : {}),
        },
      ]),
    );
  }

  /**
   * Takes over a predecessor's leases: their units count as in use at once, each holder's lease goes
   * on for what is left of lease_timeout after the time leaders served without hearing from it (the
   * time nobody led does not count: it could not renew then), and the recent request ids are
   * answered as replays. Throttlers no longer of kind concurrency are skipped. Returns the units
   * restored per throttler.
   */
  restore(leases: Readonly<Record<string, PersistedLeases>>): Record<string, number> {
    const now = this.options.clock.now();
    const restored: [string, number][] = [];
    for (const [throttlerId, state] of Object.entries(leases)) {
      const leaseMs = this.options.leaseMsOf(throttlerId);
      if (leaseMs === null) continue;
      let units = 0;
      for (const [clientId, byClass] of Object.entries(state.holders)) {
        for (const [classId, amount] of Object.entries(byClass)) {
          if (!(amount > 0) || !Number.isFinite(amount)) continue;
          // The same lease id for every class of a holder: grant() reuses the holder's lease.
          this.table.grant(throttlerId, clientId, classId, amount, now, leaseMs);
          this.options.holdUnits(throttlerId, amount, classId);
          units += amount;
        }
        const silentMs = state.silentMs && Object.hasOwn(state.silentMs, clientId) ? state.silentMs[clientId] : 0;
        this.table.restoredSilence(throttlerId, clientId, silentMs ?? 0, now, leaseMs);
      }
      for (const r of state.requestIds) {
        if (r.expiresAtMs <= now) continue;
        // Remembered as long as the predecessor would have remembered it; the records come oldest
        // first, so insertion order stays expiry order.
        const expiresAt = Math.min(r.expiresAtMs, now + this.options.rememberMs);
        // Its holder's restored lease covers it; a holder persisted without units has nothing to answer from.
        const leaseId = this.table.leaseIdOf(throttlerId, r.clientId);
        if (leaseId === 0) continue;
        this.requestIds.remember(
          { throttlerId, requestId: r.requestId, clientId: r.clientId, amount: r.amount, waitedMs: r.waitedMs, expiresAt, leaseId },
          now,
        );
      }
      this.changes.mark(throttlerId);
      restored.push([throttlerId, units]);
    }
    return Object.fromEntries(restored);
  }

  /**
   * What persisted() gives for one id now (undefined: nothing held, no request id to answer again),
   * without a walk of the others: a keyed throttler's leases are by key, and a leader's write looks
   * at the keys that changed only.
   */
  persistedOf(id: string, now: number): PersistedLeases | undefined {
    this.requestIds.forgetExpired(now);
    const holders = this.table.holdersOf(id);
    const requestIds: PersistedLeases["requestIds"][number][] = [];
    for (const grant of this.requestIds.ofThrottler(id)) {
      requestIds.push({ requestId: grant.requestId, clientId: grant.clientId, amount: grant.amount, waitedMs: grant.waitedMs, expiresAtMs: grant.expiresAt });
    }
    if (holders.length === 0 && requestIds.length === 0) return undefined;
    if (requestIds.length > PERSISTED_REQUEST_IDS_MAX) requestIds.splice(0, requestIds.length - PERSISTED_REQUEST_IDS_MAX);
    const leaseMs = holders.length === 0 ? null : this.options.leaseMsOf(id);
    const silent = leaseMs === null ? null : this.table.silenceToPersist(id, now, leaseMs).silentMs;
    return {
      holders: Object.fromEntries(holders.map(({ clientId, byClass }) => [clientId, Object.fromEntries(byClass)])),
      requestIds,
      ...(silent && silent.size > 0 ? { silentMs: Object.fromEntries(silent) } : {}),
    };
  }

  /**
   * The ids whose persisted() entry may differ from the one this gave last (null: every id; the
   * first call), for a failover leader's next write. Request ids past their time are forgotten
   * first and the holders' silences looked at when one may have grown a step, as persisted() would.
   */
  takeChanged(now: number): ReadonlySet<string> | null {
    this.requestIds.forgetExpired(now);
    if (this.table.silenceMayChange(now)) this.silencePass(now);
    return this.changes.take();
  }

  /** lease_timeout may be another now (a reconfiguration): every id's silence is looked at again. */
  leaseTimesChanged(): void {
    this.table.leaseTimesChanged();
    this.changes.markAll();
  }

  close(): void {
    this.stopping.abort();
  }

  private async sweep(): Promise<void> {
    const signal = this.stopping.signal;
    while (!signal.aborted) {
      try {
        await this.options.clock.sleep(LEASE_SWEEP_MS, signal);
      } catch {
        return;
      }
      const now = this.options.clock.now();
      const expired = this.table.expire(now);
      for (const lease of expired) {
        const counts = this.expired.get(lease.throttlerId) ?? { leases: 0, units: 0 };
        counts.leases += 1;
        counts.units += lease.units;
        this.expired.set(lease.throttlerId, counts);
        this.changes.mark(lease.throttlerId);
        for (const [classId, units] of lease.byClass) this.options.releaseUnits(lease.throttlerId, units, classId);
        this.options.log(
          `concurrency ${lease.throttlerId}: lease of ${JSON.stringify(lease.clientId)} ended without renewal ` +
            `(lease_timeout ${this.options.leaseMsOf(lease.throttlerId) ?? "?"}ms); ${lease.units} units given back`,
        );
      }
      // Looked at only when someone persists the leases: a failover leader.
      const silences = (this.options.persistedChanged !== undefined || this.changes.tracked) && this.silencePass(now);
      if (this.options.persistedChanged && (expired.length > 0 || silences)) this.options.persistedChanged();
    }
  }

  private silencePass(now: number): boolean {
    return this.table.silencePass(now, this.options.leaseMsOf, (id) => this.changes.mark(id));
  }
}
