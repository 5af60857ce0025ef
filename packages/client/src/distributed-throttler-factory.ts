import { ownEntry, PacedThrottler, PrefetchingThrottler, SluiceError, slotExpiryMs, smoothDispatchGuardMs, type Clock } from "@sluice/core";
import type { QuotaServiceClient } from "@sluice/protocol";
import { effectiveLimit, keyThrottlerSpec, type DynamicSpec, type ThrottlerSpec } from "@sluice/spec";
import { clientConfigEquals, prefetchWindow, smoothPrefetchWindow } from "./client-config.ts";
import { notKeyedError } from "./key-handle.ts";
import { KeyClientCache, type KeyClient, type ThrottlerClient } from "./key-client-cache.ts";
import { ConcurrencyClient } from "./concurrency-client.ts";
import { RetryingQuotaRemote, type QuotaRpcOutcome } from "./retrying-quota-remote.ts";
import { ThrottlerHandle, type ThrottlerHandleMetrics } from "./throttler-handle.ts";
import type { ThrottlerMeters } from "./throttler-meters.ts";

export interface DistributedThrottlerFactoryOptions {
  /** The computation these clients belong to: its dynamic_spec entry names their classes. */
  readonly computation: string;
  /** Stable caller id sent with every request, e.g. "<worker>/<computation>/<partition>". */
  readonly clientId: string;
  /** The controller connection, looked up per RPC. */
  readonly client: () => QuotaServiceClient;
  readonly clock: Clock;
  readonly random?: () => number;
  readonly onRpc?: (outcome: QuotaRpcOutcome) => void;
  /**
   * The quota class to use on a throttler when it is not the computation's dynamic_spec entry that
   * says (a standalone client, §7.7): a string wins, undefined falls back to that entry.
   */
  readonly quotaClass?: (throttlerId: string) => string | undefined;
  /** How long a keyed throttler's key goes without a call before its client may be dropped (default 60 s). */
  readonly keyIdleMs?: number;
}

/** A throttler's client (key-client-cache.ts: ThrottlerClient) and the spec it was built for. */
type Built = KeyClient;

/**
 * A concurrency client is kept across every reconfiguration that keeps the kind: its units are
 * tasks in flight, and a new client would not know them (their release would be lost and the old
 * client would have to give them back while the tasks still run). It reads the spec in force.
 */
function keepsClient(previous: Built, next: ThrottlerSpec): boolean {
  if (previous.spec.kind === "concurrency" || next.kind === "concurrency") return previous.spec.kind === next.kind;
  return clientConfigEquals(previous.spec, next);
}

/**
 * Owns the throttler clients of one job (the reference's IDistributedThrottlerFactory): one
 * prefetching client per declared throttler, behind stable handles; the job's lag timestamp and
 * the computation's class per throttler, read at RPC time; and live reconfiguration with the rules
 * of docs/design.md §9.9 — a client is rebuilt only when its own config (prefetch window, retries,
 * rpc_timeout) changes, so weights, `period` and `max_grant_amount` changes keep its pool.
 */
export class DistributedThrottlerFactory {
  private readonly handles = new Map<string, ThrottlerHandle>();
  private readonly built = new Map<string, Built>();
  /** Replaced clients still serving the callers that waited on them, by throttler id. */
  private readonly retiring = new Map<ThrottlerClient, string>();
  /** Keyed throttlers (docs/design.md §11.4): the client of each key used lately, by throttler id then key. */
  private readonly keyClients: KeyClientCache;
  private spec: DynamicSpec = { throttlers: {}, computations: {} };
  private priorityMs = 0;
  private closed = false;

  constructor(private readonly options: DistributedThrottlerFactoryOptions) {
    this.keyClients = new KeyClientCache({ clock: options.clock, ...(options.keyIdleMs !== undefined ? { idleMs: options.keyIdleMs } : {}) });
  }

  /** Keys of keyed throttlers with a client now (a key unused for a while and holding nothing has none). */
  get keyClientCount(): number {
    return this.keyClients.size;
  }

  /** Drops the clients of keys idle for long enough now, instead of at the next periodic sweep; returns how many. */
  sweepIdleKeys(): number {
    return this.keyClients.sweep();
  }

  /** The job's lag timestamp: smaller is served first; 0 = no information yet. */
  setPriority(timestampMs: number): void {
    this.priorityMs = timestampMs;
  }

  get priority(): number {
    return this.priorityMs;
  }

  /**
   * Applies a dynamic_spec: builds, keeps, rebuilds or detaches clients; handles survive. A throttler
   * the spec no longer declares is closed at once: its waiting callers fail with THROTTLER_REMOVED
   * (the controller refuses it too, so waiting on would only spend the retry budget). `version` is
   * the spec's version on the controller, for that message.
   */
  reconfigure(spec: DynamicSpec, version?: number): void {
    if (this.closed) return;
    this.spec = spec;
    for (const [id, throttlerSpec] of Object.entries(spec.throttlers)) {
      const previous = this.built.get(id);
      this.reconfigureKeys(id, throttlerSpec);
      if (previous && keepsClient(previous, throttlerSpec)) {
        this.built.set(id, { spec: throttlerSpec, client: previous.client });
        continue;
      }
      const client = this.build(id, throttlerSpec);
      this.built.set(id, { spec: throttlerSpec, client });
      this.handle(id).attach(client);
      // Callers already waiting on the old client are still served by it; then it returns its pool.
      if (previous) this.retire(id, previous.client);
    }
    for (const [id, previous] of [...this.built]) {
      if (Object.hasOwn(spec.throttlers, id)) continue;
      this.built.delete(id);
      this.handles.get(id)?.attach(null);
      const removed = this.removedError(id, version);
      previous.client.close(removed);
      for (const client of this.keyClients.remove(id)) client.close(removed);
      for (const [client, retiringId] of this.retiring) {
        if (retiringId !== id) continue;
        client.close(removed);
        this.retiring.delete(client);
      }
    }
  }

  getThrottlerOrThrow(throttlerId: string): ThrottlerHandle {
    const handle = this.tryGetThrottler(throttlerId);
    if (handle) return handle;
    const declared = Object.keys(this.spec.throttlers);
    throw new SluiceError(
      "THROTTLER_NOT_DECLARED",
      `throttler "${throttlerId}" is not declared in dynamic_spec.throttlers (computation "${this.options.computation}"; ` +
        `declared: ${declared.length > 0 ? declared.map((id) => `"${id}"`).join(", ") : "none"})`,
      { throttlerId, computation: this.options.computation, declared },
    );
  }

  /** The handle, or null when the throttler is not declared now (ask again after a reconfiguration). */
  tryGetThrottler(throttlerId: string): ThrottlerHandle | null {
    if (!this.built.has(throttlerId)) return null;
    return this.handle(throttlerId);
  }

  /** Whether a throttler counts units in use (its units are held until released). */
  isConcurrency(throttlerId: string): boolean {
    return ownEntry(this.spec.throttlers, throttlerId)?.kind === "concurrency";
  }

  /** Quota class this computation uses on a throttler, from its dynamic_spec entry ("" = default). */
  classIdFor(throttlerId: string): string {
    const chosen = this.options.quotaClass?.(throttlerId);
    if (chosen !== undefined) return chosen;
    const entry = this.spec.computations[this.options.computation];
    if (!entry) return "";
    if (entry.input_rows_throttler_id === throttlerId) return entry.input_rows_throttler_class_id ?? "";
    if (entry.input_bytes_throttler_id === throttlerId) return entry.input_bytes_throttler_class_id ?? "";
    return "";
  }

  /**
   * The weight of this computation's class over the sum of the throttler's class weights (1 with no
   * classes). An id the throttler does not declare is served in the default class, weight 1.
   */
  private classWeightShare(throttlerId: string): number {
    const classes = ownEntry(this.spec.throttlers, throttlerId)?.classes;
    if (!classes) return 1;
    const weights = Object.values(classes).map((c) => c.weight);
    if (weights.length === 0) return 1;
    const own = classes[this.classIdFor(throttlerId)]?.weight;
    const total = weights.reduce((sum, w) => sum + w, 0) + (own === undefined ? 1 : 0);
    return Math.min(1, (own ?? 1) / total);
  }

  metrics(): ThrottlerHandleMetrics[] {
    return [...this.handles.values()].map((handle) => handle.metrics());
  }

  /** Every handle's sensors by throttler id (a worker folds a stopped job's into its running totals). */
  meters(): [throttlerId: string, meters: ThrottlerMeters][] {
    return [...this.handles.values()].map((handle) => [handle.throttlerId, handle.meters]);
  }

  /**
   * Fails waiting callers with CANCELLED, returns every pool to the controller, and stops every
   * handle: a later call says that its owner stopped (`reason`), not that the throttler is
   * undeclared. Idempotent.
   */
  close(reason = "its throttler client was closed"): void {
    if (this.closed) return;
    this.closed = true;
    for (const { client } of this.built.values()) client.close(reason);
    for (const client of this.retiring.keys()) client.close(reason);
    for (const client of this.keyClients.clear()) client.close(reason);
    this.built.clear();
    this.retiring.clear();
    for (const handle of this.handles.values()) handle.stop(reason);
  }

  /** A replaced client finishes its waiters on its own, but is closed with the job if it has not yet. */
  private retire(id: string, client: ThrottlerClient): void {
    this.retiring.set(client, id);
    client.retire();
    // Cheap sweep: clients that already finished retiring need no closing.
    for (const old of this.retiring.keys()) if (old.isClosed) this.retiring.delete(old);
  }

  private removedError(throttlerId: string, version: number | undefined): SluiceError {
    const where = version === undefined ? "dynamic_spec" : `dynamic_spec version ${version}`;
    return new SluiceError(
      "THROTTLER_REMOVED",
      `throttler "${throttlerId}" was removed: ${where} no longer declares it (computation "${this.options.computation}"); ` +
        "not retried: declare it again with `sluice reconfigure` to use it",
      { throttlerId, computation: this.options.computation, ...(version === undefined ? {} : { version }) },
    );
  }

  private handle(throttlerId: string): ThrottlerHandle {
    let handle = this.handles.get(throttlerId);
    if (!handle) {
      handle = new ThrottlerHandle(throttlerId, this.options.computation, this.options.clock);
      handle.keyClients = (key) => this.keyClient(throttlerId, key);
      this.handles.set(throttlerId, handle);
    }
    return handle;
  }

  /**
   * The client of one key of a keyed throttler, built on the key's first use with the key's own
   * spec (the template and its override). Every key's refills go over the same connection as the
   * throttler's (one QuotaStream per worker), so many keys never mean an RPC stream per key.
   */
  private keyClient(throttlerId: string, key: string): ThrottlerClient {
    const built = this.built.get(throttlerId);
    if (!built) {
      this.getThrottlerOrThrow(throttlerId); // THROTTLER_NOT_DECLARED, naming the declared ones
      throw notKeyedError(throttlerId);
    }
    if (built.spec.keyed === undefined) throw notKeyedError(throttlerId);
    const existing = this.keyClients.use(throttlerId, key);
    if (existing) return existing;
    const spec = keyThrottlerSpec(built.spec, key);
    const client = this.build(throttlerId, spec, key);
    this.keyClients.set(throttlerId, key, { spec, client });
    return client;
  }

  /** A new spec for a keyed throttler: each key's client is kept, or rebuilt when its own spec changed. */
  private reconfigureKeys(throttlerId: string, next: ThrottlerSpec): void {
    for (const [key, previous] of this.keyClients.entries(throttlerId)) {
      const spec = keyThrottlerSpec(next, key);
      if (next.keyed !== undefined && keepsClient(previous, spec)) {
        this.keyClients.keep(throttlerId, key, spec);
        continue;
      }
      this.keyClients.delete(throttlerId, key);
      this.retire(throttlerId, previous.client);
    }
  }

  /** The spec in force for a throttler, or the one it was built with if it has since been removed. */
  private specOf(throttlerId: string, fallback: ThrottlerSpec): ThrottlerSpec {
    return ownEntry(this.spec.throttlers, throttlerId) ?? fallback;
  }

  private build(throttlerId: string, spec: ThrottlerSpec, key?: string): ThrottlerClient {
    const handle = this.handle(throttlerId);
    const current = () => (key === undefined ? this.specOf(throttlerId, spec) : keyThrottlerSpec(this.specOf(throttlerId, spec), key));
    const remote = new RetryingQuotaRemote({
      client: this.options.client,
      throttlerId,
      ...(key === undefined ? {} : { key }),
      clientId: this.options.clientId,
      // Read at each call, so a kept concurrency client follows reconfigured retries and timeouts.
      spec: {
        get rpc_timeout() {
          return current().rpc_timeout;
        },
        get retrying_channel() {
          return current().retrying_channel;
        },
      },
      priority: () => this.priorityMs,
      classId: () => this.classIdFor(throttlerId),
      traceContext: () => handle.callerContext,
      clock: this.options.clock,
      ...(this.options.random ? { random: this.options.random } : {}),
      onRpc: (outcome) => {
        handle.meters.rpcCount += 1;
        if (!outcome.ok) handle.meters.rpcFailures += 1;
        this.options.onRpc?.(outcome);
      },
      onRelease: (amount) => (handle.meters.returned += amount),
    });
    if (spec.kind === "concurrency") {
      return new ConcurrencyClient({
        throttlerId,
        ...(key === undefined ? {} : { key }),
        clientId: this.options.clientId,
        remote,
        client: this.options.client,
        clock: this.options.clock,
        spec: current,
      });
    }
    if (spec.smooth) {
      // With a fixed limit the client also checks its own callers' departures against the window
      // (PacedConfig.window); an adaptive limit moves on the controller only.
      const limit = spec.adaptive ? null : effectiveLimit(spec);
      // Each key's calls reach the system behind it at the key's own rate: a window per key.
      const sharedAs = key === undefined ? throttlerId : `${throttlerId}\u0000${key}`;
      const window =
        limit === null ? {} : { window: { units: (limit * spec.period) / 1000, periodMs: spec.period, guardMs: smoothDispatchGuardMs(spec.period), sharedAs } };
      const config = { ...smoothPrefetchWindow(spec), slotExpiryMs: slotExpiryMs(spec.period), ...window };
      return new PacedThrottler(config, remote, this.options.clock, throttlerId);
    }
    const classWeightShare = () => this.classWeightShare(throttlerId);
    return new PrefetchingThrottler({ ...prefetchWindow(spec), classWeightShare }, remote, this.options.clock, throttlerId);
  }
}
