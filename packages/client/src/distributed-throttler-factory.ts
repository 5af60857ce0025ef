import { PacedThrottler, PrefetchingThrottler, SluiceError, slotExpiryMs, type Clock } from "@sluice/core";
import type { QuotaServiceClient } from "@sluice/protocol";
import { clientConfigEquals, prefetchWindow, type DynamicSpec, type ThrottlerSpec } from "@sluice/spec";
import { RetryingQuotaRemote, type QuotaRpcOutcome } from "./retrying-quota-remote.ts";
import { ThrottlerHandle, type ThrottlerHandleMetrics } from "./throttler-handle.ts";

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
}

/** A smooth throttler's client paces what it hands out (DESIGN §7.1); any other prefetches. */
type ThrottlerClient = PrefetchingThrottler | PacedThrottler;

interface Built {
  readonly spec: ThrottlerSpec;
  readonly client: ThrottlerClient;
}

/**
 * Owns the throttler clients of one job (the reference's IDistributedThrottlerFactory): one
 * prefetching client per declared throttler, behind stable handles; the job's lag timestamp and
 * the computation's class per throttler, read at RPC time; and live reconfiguration with the rules
 * of DESIGN §4.9 — a client is rebuilt only when its own config (prefetch window, retries,
 * rpc_timeout) changes, so weights, `period` and `max_grant_amount` changes keep its pool.
 */
export class DistributedThrottlerFactory {
  private readonly handles = new Map<string, ThrottlerHandle>();
  private readonly built = new Map<string, Built>();
  private readonly retiring = new Set<ThrottlerClient>();
  private spec: DynamicSpec = { throttlers: {}, computations: {} };
  private priorityMs = 0;
  private closed = false;

  constructor(private readonly options: DistributedThrottlerFactoryOptions) {}

  /** The job's lag timestamp: smaller is served first; 0 = no information yet. */
  setPriority(timestampMs: number): void {
    this.priorityMs = timestampMs;
  }

  get priority(): number {
    return this.priorityMs;
  }

  /** Applies a dynamic_spec: builds, keeps, rebuilds or detaches clients; handles survive. */
  reconfigure(spec: DynamicSpec): void {
    if (this.closed) return;
    this.spec = spec;
    for (const [id, throttlerSpec] of Object.entries(spec.throttlers)) {
      const previous = this.built.get(id);
      if (previous && clientConfigEquals(previous.spec, throttlerSpec)) {
        this.built.set(id, { spec: throttlerSpec, client: previous.client });
        continue;
      }
      const client = this.build(id, throttlerSpec);
      this.built.set(id, { spec: throttlerSpec, client });
      this.handle(id).attach(client);
      // Callers already waiting on the old client are still served by it; then it returns its pool.
      if (previous) this.retire(previous.client);
    }
    for (const [id, previous] of [...this.built]) {
      if (Object.hasOwn(spec.throttlers, id)) continue;
      this.built.delete(id);
      this.handles.get(id)?.attach(null);
      this.retire(previous.client);
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

  /** Quota class this computation uses on a throttler, from its dynamic_spec entry ("" = default). */
  classIdFor(throttlerId: string): string {
    const entry = this.spec.computations[this.options.computation];
    if (!entry) return "";
    if (entry.input_rows_throttler_id === throttlerId) return entry.input_rows_throttler_class_id ?? "";
    if (entry.input_bytes_throttler_id === throttlerId) return entry.input_bytes_throttler_class_id ?? "";
    return "";
  }

  metrics(): ThrottlerHandleMetrics[] {
    return [...this.handles.values()].map((handle) => handle.metrics());
  }

  /** Fails waiting callers and returns every pool to the controller. Idempotent. */
  close(): void {
    if (this.closed) return;
    this.closed = true;
    for (const { client } of this.built.values()) client.close("the job stopped");
    for (const client of this.retiring) client.close("the job stopped");
    this.built.clear();
    this.retiring.clear();
    for (const handle of this.handles.values()) handle.attach(null);
  }

  /** A replaced client finishes its waiters on its own, but is closed with the job if it has not yet. */
  private retire(client: ThrottlerClient): void {
    this.retiring.add(client);
    client.retire();
    // Cheap sweep: clients that already finished retiring need no closing.
    for (const old of this.retiring) if (old.isClosed) this.retiring.delete(old);
  }

  private handle(throttlerId: string): ThrottlerHandle {
    let handle = this.handles.get(throttlerId);
    if (!handle) {
      handle = new ThrottlerHandle(throttlerId, this.options.computation, this.options.clock);
      this.handles.set(throttlerId, handle);
    }
    return handle;
  }

  private build(throttlerId: string, spec: ThrottlerSpec): ThrottlerClient {
    const handle = this.handle(throttlerId);
    const remote = new RetryingQuotaRemote({
      client: this.options.client,
      throttlerId,
      clientId: this.options.clientId,
      spec,
      priority: () => this.priorityMs,
      classId: () => this.classIdFor(throttlerId),
      traceContext: () => handle.callerContext,
      clock: this.options.clock,
      ...(this.options.random ? { random: this.options.random } : {}),
      onRpc: (outcome) => {
        handle.rpcCount += 1;
        if (!outcome.ok) handle.rpcFailures += 1;
        this.options.onRpc?.(outcome);
      },
      onRelease: (amount) => handle.recordReturned(amount),
    });
    if (spec.smooth) {
      const config = { ...prefetchWindow(spec), slotExpiryMs: slotExpiryMs(spec.period) };
      return new PacedThrottler(config, remote, this.options.clock, throttlerId);
    }
    return new PrefetchingThrottler(prefetchWindow(spec), remote, this.options.clock, throttlerId);
  }
}
