import type { Clock, PacedThrottler, PrefetchingThrottler } from "@sluice/core";
import type { ThrottlerSpec } from "@sluice/spec";
import { ConcurrencyClient } from "./concurrency-client.ts";

// The clients of a keyed throttler's keys in one job (docs/design.md §11.4). A key used once must not
// cost memory for good: a key's client that has had no call for a while and holds nothing — no
// caller waiting, no refill in flight, no unit held, no paced slot to come — is retired (its unused
// pool goes back to the controller) and forgotten. Its `forKey` handles stay valid: they look their
// key's client up at every call, and the next call builds a new one, exactly as a first use does.

/** A throttler's client in a job: prefetching (rate), paced (smooth) or leasing (concurrency). */
export type ThrottlerClient = PrefetchingThrottler | PacedThrottler | ConcurrencyClient;

/** A key's client is dropped after this long without a call (and never while it holds anything). */
export const KEY_CLIENT_IDLE_MS = 60_000;

export interface KeyClient {
  readonly spec: ThrottlerSpec;
  readonly client: ThrottlerClient;
}

interface Entry extends KeyClient {
  lastUsedAt: number;
}

/** Whether dropping `client` now loses nothing: nobody waits on it, it asked for nothing, it holds nothing. */
export function holdsNothing(client: ThrottlerClient): boolean {
  if (client instanceof ConcurrencyClient) return client.isIdle;
  const stats = client.stats();
  // A pool below 0 was lent ahead of a refill in flight; a paced client's due or upcoming slots are quota to hand out.
  if (stats.queuedRequests > 0 || stats.inFlight > 0 || stats.available < 0) return false;
  return !("upcoming" in stats) || (stats.upcoming === 0 && stats.available === 0);
}

export interface KeyClientCacheOptions {
  readonly clock: Clock;
  /** How long without a call before a key's client may be dropped; default KEY_CLIENT_IDLE_MS. */
  readonly idleMs?: number;
}

export class KeyClientCache {
  private readonly byThrottler = new Map<string, Map<string, Entry>>();
  private readonly idleMs: number;
  private sweeper: AbortController | null = null;
  private closed = false;

  constructor(private readonly options: KeyClientCacheOptions) {
    this.idleMs = options.idleMs ?? KEY_CLIENT_IDLE_MS;
  }

  /** Keys with a client now, over every keyed throttler. */
  get size(): number {
    let size = 0;
    for (const clients of this.byThrottler.values()) size += clients.size;
    return size;
  }

  /** The open client of `key`, stamped as used now; or undefined (never built, dropped, or closed). */
  use(throttlerId: string, key: string): ThrottlerClient | undefined {
    const entry = this.byThrottler.get(throttlerId)?.get(key);
    if (!entry || entry.client.isClosed) return undefined;
    entry.lastUsedAt = this.options.clock.now();
    return entry.client;
  }

  set(throttlerId: string, key: string, built: KeyClient): void {
    let clients = this.byThrottler.get(throttlerId);
    if (!clients) {
      clients = new Map();
      this.byThrottler.set(throttlerId, clients);
    }
    clients.set(key, { ...built, lastUsedAt: this.options.clock.now() });
    this.startSweeping();
  }

  /** The keys' clients of one throttler (reconfiguration walks them). */
  entries(throttlerId: string): [key: string, client: KeyClient][] {
    return [...(this.byThrottler.get(throttlerId) ?? [])];
  }

  /** Keeps `key`'s client under a new spec (its lastUsedAt is kept). */
  keep(throttlerId: string, key: string, spec: ThrottlerSpec): void {
    const entry = this.byThrottler.get(throttlerId)?.get(key);
    if (entry) this.byThrottler.get(throttlerId)?.set(key, { ...entry, spec });
  }

  delete(throttlerId: string, key: string): void {
    this.byThrottler.get(throttlerId)?.delete(key);
  }

  /** Forgets a throttler's keys; returns their clients for the caller to close. */
  remove(throttlerId: string): ThrottlerClient[] {
    const clients = [...(this.byThrottler.get(throttlerId)?.values() ?? [])].map((entry) => entry.client);
    this.byThrottler.delete(throttlerId);
    return clients;
  }

  /** Forgets every key; returns their clients for the caller to close. Stops the sweeps. */
  clear(): ThrottlerClient[] {
    this.closed = true;
    this.sweeper?.abort();
    this.sweeper = null;
    const clients = [...this.byThrottler.values()].flatMap((of) => [...of.values()].map((entry) => entry.client));
    this.byThrottler.clear();
    return clients;
  }

  /** Retires and forgets every key's client idle for long enough that holds nothing; returns how many. */
  sweep(now = this.options.clock.now()): number {
    let dropped = 0;
    for (const [throttlerId, clients] of this.byThrottler) {
      for (const [key, entry] of clients) {
        // Never within two request periods or two periods of the key's last call: the prefetch sizing
        // and a smooth key's dispatch window (period + guard) still count it.
        const quietMs = Math.max(this.idleMs, 2 * entry.spec.request_period, 2 * entry.spec.period);
        if (!entry.client.isClosed && (now - entry.lastUsedAt < quietMs || !holdsNothing(entry.client))) continue;
        clients.delete(key);
        // Nobody waits and nothing is in flight, so retiring closes it at once and gives its pool back.
        if (!entry.client.isClosed) entry.client.retire();
        dropped++;
      }
      if (clients.size === 0) this.byThrottler.delete(throttlerId);
    }
    return dropped;
  }

  /** While any key has a client, sweeps every quarter of idleMs, so a job that stops using keys gives their pools back. */
  private startSweeping(): void {
    if (this.sweeper || this.closed) return;
    const sweeper = new AbortController();
    this.sweeper = sweeper;
    void (async () => {
      while (this.byThrottler.size > 0) {
        try {
          await this.options.clock.sleep(this.idleMs / 4, sweeper.signal);
        } catch {
          return;
        }
        this.sweep();
      }
      if (this.sweeper === sweeper) this.sweeper = null;
    })();
  }
}
