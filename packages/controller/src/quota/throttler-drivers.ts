import { QuotaBucketDriver, SluiceError, type Clock, type QuotaBucketConfig } from "@sluice/core";
import type { BucketUsageSample } from "../adaptive/adaptive-limits.ts";
import { describeLimit, sameBucketConfig } from "./bucket-config.ts";
import type { BucketBalance } from "./controller-snapshot.ts";
import { GRANTED_RATE_SAMPLE_MS, GrantedRates } from "./granted-rates.ts";
import { RemovedThrottlers, removedError } from "./removed-throttlers.ts";

/** What a new set of bucket configs changed, by throttler id (for the controller's log line). */
export interface DriverChanges {
  readonly added: string[];
  readonly removed: string[];
  readonly changed: string[];
}

/**
 * The controller's buckets: one QuotaBucketDriver and its config per declared throttler, the
 * throttlers removed lately (so their callers hear THROTTLER_REMOVED), and each one's granted rate.
 */
export class ThrottlerDrivers {
  private readonly drivers = new Map<string, QuotaBucketDriver>();
  private readonly configs = new Map<string, QuotaBucketConfig>();
  private readonly removed = new RemovedThrottlers();
  private readonly rates = new GrantedRates();

  constructor(private readonly clock: Clock) {}

  get size(): number {
    return this.configs.size;
  }

  get(id: string): QuotaBucketDriver | undefined {
    return this.drivers.get(id);
  }

  all(): IterableIterator<QuotaBucketDriver> {
    return this.drivers.values();
  }

  /** `id=limit` of every throttler, e.g. `api=100/s, bytes=unlimited`. */
  describeLimits(): string {
    return [...this.configs].map(([id, config]) => `${id}=${describeLimit(config)}`).join(", ");
  }

  add(id: string, config: QuotaBucketConfig): void {
    const driver = new QuotaBucketDriver(id, config, this.clock);
    this.drivers.set(id, driver);
    this.configs.set(id, config);
    this.rates.track(driver.snapshot());
  }

  /**
   * Takes the configs of a new dynamic_spec `version` in one synchronous step: a throttler left out
   * is closed for its waiters, a new one starts, the others are reconfigured in place.
   */
  sync(nextConfigs: ReadonlyMap<string, QuotaBucketConfig>, version: number): DriverChanges {
    const added: string[] = [];
    const removed: string[] = [];
    const changed: string[] = [];
    for (const [id, driver] of this.drivers) {
      if (nextConfigs.has(id)) continue;
      removed.push(id);
      // Final for its waiters (THROTTLER_REMOVED is not retried): retrying UNKNOWN_THROTTLER for the
      // whole retry budget kept a waiting throttle() stranded for minutes.
      driver.close(removedError(id, version, version));
      this.removed.remember(id, version);
      this.drivers.delete(id);
      this.configs.delete(id);
      this.rates.forget(id);
    }
    for (const [id, config] of nextConfigs) {
      const driver = this.drivers.get(id);
      const previous = this.configs.get(id);
      if (!driver || !previous) {
        added.push(id);
        this.removed.forget(id);
        this.add(id, config);
        continue;
      }
      if (!sameBucketConfig(previous, config)) changed.push(id);
      driver.reconfigure(config);
      this.configs.set(id, config);
    }
    return { added, removed, changed };
  }

  /** The adaptive loop moved a limit: the bucket takes it at once, the rest of its config unchanged. */
  setLimit(id: string, limit: number): void {
    const driver = this.drivers.get(id);
    const config = this.configs.get(id);
    if (!driver || !config || config.limit === limit) return;
    const next = { ...config, limit };
    driver.reconfigure(next);
    this.configs.set(id, next);
  }

  usageSample(id: string): BucketUsageSample | undefined {
    const bucket = this.drivers.get(id)?.snapshot();
    if (!bucket) return undefined;
    return {
      granted: bucket.counters.granted,
      released: bucket.counters.released,
      pendingRequests: bucket.pendingRequests,
      inUse: bucket.inUse ?? null,
    };
  }

  /** The driver of a declared throttler; THROTTLER_REMOVED or UNKNOWN_THROTTLER otherwise. */
  driverFor(throttlerId: string, version: number): QuotaBucketDriver {
    const driver = this.drivers.get(throttlerId);
    if (driver) return driver;
    const removed = this.removed.errorFor(throttlerId, version);
    if (removed) throw removed;
    // Only refusals list the declared throttlers: building that list on every call would cost a
    // busy controller with many throttlers most of its time.
    const declared = [...this.drivers.keys()];
    const list = declared.length === 0 ? "none" : declared.map((id) => JSON.stringify(id)).join(", ");
    if (throttlerId === "") {
      throw new SluiceError("UNKNOWN_THROTTLER", `the throttler id is empty; declared throttlers: ${list}`, { declared });
    }
    throw new SluiceError(
      "UNKNOWN_THROTTLER",
      `throttler ${JSON.stringify(throttlerId)} is not declared on this controller (dynamic_spec version ${version}; ` + `declared throttlers: ${list})`,
      { throttlerId, declared, version },
    );
  }

  /** Each limited bucket's balance now; unlimited buckets have none and are left out. */
  balances(): Record<string, BucketBalance> {
    const atMs = this.clock.now();
    const balances: [string, BucketBalance][] = [];
    for (const [id, driver] of this.drivers) {
      const { balance, limit, capacity } = driver.snapshot();
      if (balance !== null && Number.isFinite(balance)) balances.push([id, { balance, atMs, limitPerSecond: limit, capacity }]);
    }
    // Own properties whatever the ids (`record[id] = …` would drop a "__proto__").
    return Object.fromEntries(balances);
  }

  /** Sets persisted balances (docs/design.md §5.2); ids no longer declared are ignored. Returns the ids restored. */
  restoreBalances(balances: Readonly<Record<string, BucketBalance>>): string[] {
    const restored: string[] = [];
    for (const [id, { balance, atMs }] of Object.entries(balances)) {
      const driver = this.drivers.get(id);
      if (!driver) continue;
      driver.restoreBalance(balance, atMs);
      restored.push(id);
    }
    return restored;
  }

  /** The granted-rate windows, fed by `sampleRates` and by every snapshot. */
  get grantedRates(): GrantedRates {
    return this.rates;
  }

  close(error: SluiceError): void {
    for (const driver of this.drivers.values()) driver.close(error);
  }

  /** Feeds the granted-rate windows between describes, so each grant lands near its own time. */
  async sampleRates(signal: AbortSignal): Promise<void> {
    while (!signal.aborted) {
      try {
        await this.clock.sleep(GRANTED_RATE_SAMPLE_MS, signal);
      } catch {
        return; // closed
      }
      const now = this.clock.now();
      for (const driver of this.drivers.values()) this.rates.sample(driver.snapshot(), now);
    }
  }
}
