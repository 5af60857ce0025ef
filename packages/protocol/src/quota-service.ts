import type { Cancellation } from "@sluice/core";

/**
 * The QuotaService contract in TypeScript terms, independent of the transport. The controller
 * implements `QuotaServiceHandler`; jobs call through a `QuotaServiceClient` — over gRPC
 * (grpc-server.ts / grpc-client.ts) or in memory (in-memory-transport.ts) with the same semantics,
 * so one contract test suite runs against both.
 *
 * Errors are SluiceErrors on both sides; on the wire they travel as the gRPC status of their code
 * with the code in metadata `sluice-error-code` (error-mapping.ts).
 */

export interface RequestQuotaCall {
  readonly throttlerId: string;
  readonly clientId: string;
  readonly amount: number;
  /** Lag priority: smaller is served first; 0 = no information yet. */
  readonly timestampMs: number;
  /** "" or unknown → default. */
  readonly quotaClassId: string;
  /** Idempotency key: the same id is granted once and resumes its place. */
  readonly requestId: string;
  /** Keyed throttlers (docs/design.md §11.4): the key whose bucket serves the call; absent or "" = not keyed. */
  readonly key?: string;
}

export interface RequestQuotaResult {
  readonly granted: number;
  readonly waitedMs: number;
  /**
   * Smooth throttlers (docs/design.md §11.1): the first granted unit's slot is this long after the answer,
   * the next ones `paceIntervalMs` apart. Absent (or 0 on the wire) = not paced.
   */
  readonly paceStartDelayMs?: number;
  readonly paceIntervalMs?: number;
  /** Smooth throttlers: the controller's clock when it answered (see ControllerClockBound). Absent (0 on the wire) = not given. */
  readonly paceAnsweredAtMs?: number;
}

type PaceFields = Pick<RequestQuotaResult, "paceStartDelayMs" | "paceIntervalMs" | "paceAnsweredAtMs">;

/** The pace fields as they cross a transport: present only when the answer is paced. */
export function paceFieldsOf(wire: { paceStartDelayMs?: number; paceIntervalMs?: number; paceAnsweredAtMs?: number }): PaceFields {
  const startDelayMs = wire.paceStartDelayMs ?? 0;
  const intervalMs = wire.paceIntervalMs ?? 0;
  if (!(intervalMs > 0) && startDelayMs === 0) return {};
  const answeredAtMs = wire.paceAnsweredAtMs ?? 0;
  return { paceStartDelayMs: startDelayMs, paceIntervalMs: intervalMs, ...(answeredAtMs > 0 ? { paceAnsweredAtMs: answeredAtMs } : {}) };
}

export interface ReleaseQuotaCall {
  readonly throttlerId: string;
  readonly clientId: string;
  readonly amount: number;
  readonly quotaClassId: string;
  /** Keyed throttlers: the key whose units come back; absent or "" = not keyed. */
  readonly key?: string;
}

export interface RenewLeasesCall {
  readonly clientId: string;
  /** Concurrency throttlers whose units the client holds. */
  readonly throttlerIds: readonly string[];
  /** Keyed throttlers: renew and count only this key's units; absent or "" = every key. */
  readonly key?: string;
}

/** One aligned input partition as its worker reports it (docs/design.md §12, ReportWatermarks). */
export interface PartitionWatermarkReport {
  readonly groupName: string;
  /** `<computation>/<stream>/<partition>`. */
  readonly partitionId: string;
  /** Largest event time read, epoch ms; 0 = nothing read yet. */
  readonly watermarkMs: number;
  /** Nothing to read for idle_timeout: does not hold the group back. */
  readonly idle: boolean;
  /** Paused by alignment now. */
  readonly held: boolean;
}

export interface ReportWatermarksCall {
  readonly clientId: string;
  /** Every aligned partition the client owns now; one it leaves out is no longer its. */
  readonly partitions: readonly PartitionWatermarkReport[];
}

/** How far the rest of a partition's group has read. */
export interface PartitionBound {
  readonly partitionId: string;
  /** Minimum watermark of the other live partitions of the group; 0 = one of them has read nothing yet. */
  readonly othersWatermarkMs: number;
  /** No other live partition: nothing holds this one back (othersWatermarkMs is then 0). */
  readonly unbounded: boolean;
}

export interface GroupWatermarkView {
  readonly groupName: string;
  /** Minimum over the live partitions; 0 = none, or one has read nothing yet. */
  readonly watermarkMs: number;
  readonly partitions: number;
  readonly held: number;
  readonly idle: number;
}

export interface ReportWatermarksResult {
  readonly bounds: readonly PartitionBound[];
  readonly groups: readonly GroupWatermarkView[];
  /** Changes when the controller restarts or fails over. */
  readonly controllerInstance: string;
  /** The controller (re)started recently and may not have heard from every worker yet. */
  readonly settling: boolean;
}

export interface DynamicSpecUpdate {
  readonly version: number;
  readonly dynamicSpecJson: string;
}

/** W3C trace context and other per-call metadata that crosses the transport. */
export type CallMetadata = Readonly<Record<string, string>>;

export interface CallOptions {
  /**
   * Absolute deadline in ms on `systemClock` (the in-memory transport: its own clock), not
   * `Date.now()`; the server sees the same deadline on its clock (only the remaining time travels).
   */
  readonly deadlineAt?: number;
  readonly signal?: AbortSignal;
  readonly metadata?: CallMetadata;
}

export interface QuotaServiceClient {
  requestQuota(call: RequestQuotaCall, options?: CallOptions): Promise<RequestQuotaResult>;
  releaseQuota(call: ReleaseQuotaCall, options?: CallOptions): Promise<void>;
  /**
   * Calls `onUpdate` with the current dynamic_spec and then every change until `signal` aborts.
   * The promise settles when the stream ends: resolves on abort, rejects when the connection fails
   * (the caller reconnects).
   */
  watchDynamicSpec(clientId: string, onUpdate: (update: DynamicSpecUpdate) => void, signal: AbortSignal): Promise<void>;
  updateDynamicSpec(dynamicSpecJson: string, options?: CallOptions): Promise<{ version: number }>;
  /** Every throttler's snapshot, or one throttler's, or one key's of a keyed throttler (`filter`). */
  describeThrottlers(options?: CallOptions, filter?: DescribeThrottlersFilter): Promise<{ snapshotJson: string }>;
  /**
   * Keeps the client's units of concurrency throttlers in use for another lease_timeout (docs/design.md §11.2).
   * Optional so that test doubles written before concurrency throttlers still compile; both real
   * transports implement it.
   */
  renewLeases?(call: RenewLeasesCall, options?: CallOptions): Promise<{ held: number }>;
  /** Watermark alignment (docs/design.md §12). Optional for the same reason as renewLeases. */
  reportWatermarks?(call: ReportWatermarksCall, options?: CallOptions): Promise<ReportWatermarksResult>;
  close(): void;
}

/** What a server hands the handler with each call. */
export interface CallContext {
  /** Absolute deadline in ms on the server's clock (`systemClock` over gRPC), or null when the caller set none. */
  readonly deadlineAt: number | null;
  /** Aborts when the caller cancels, its deadline passes or the connection drops. */
  readonly signal: AbortSignal;
  readonly metadata: CallMetadata;
  /**
   * The same as `signal`, with one listener and no EventTarget: offered by a transport that holds
   * many waiting calls (QuotaStream makes its `signal` only when something reads it). A handler
   * that waits on the call listens here when it is present.
   */
  readonly cancellation?: Cancellation;
}

export interface QuotaServiceHandler {
  requestQuota(call: RequestQuotaCall, context: CallContext): Promise<RequestQuotaResult>;
  /**
   * Optional: `requestQuota` that answers a call it can settle at once (quota at hand, nobody
   * waiting) with the result itself instead of a promise. The QuotaStream server uses it when
   * present, so that such a call costs no promise, reaction or open-call bookkeeping; everything
   * else about the call is `requestQuota`'s.
   *
   * A handler that has work to do after a grant before the grant may be answered must not
   * implement it: a result returned here leaves in the same turn's frame. The failover controller
   * is such a handler (a grant is answered only once the state write that counts it is durable,
   * docs/design.md §5.2), and so has no requestQuotaNow; its grants take `requestQuota`'s path.
   */
  requestQuotaNow?(call: RequestQuotaCall, context: CallContext): RequestQuotaResult | Promise<RequestQuotaResult>;
  releaseQuota(call: ReleaseQuotaCall, context: CallContext): Promise<void>;
  /**
   * Emits the current dynamic_spec, then every change, until `context.signal` aborts. A handler may
   * return a promise that settles when it ends the stream itself: resolved = the stream ends
   * cleanly, rejected = it ends with that error (a controller shutting down rejects with
   * CONTROLLER_UNAVAILABLE so that watchers reconnect). Returning nothing keeps the stream open
   * until the caller cancels.
   */
  watchDynamicSpec(clientId: string, emit: (update: DynamicSpecUpdate) => void, context: CallContext): void | Promise<void>;
  updateDynamicSpec(dynamicSpecJson: string, context: CallContext): Promise<{ version: number }>;
  describeThrottlers(context: CallContext, filter?: DescribeThrottlersFilter): Promise<{ snapshotJson: string }>;
  /**
   * Optional so that handlers written before concurrency throttlers still compile; a server whose
   * handler lacks it answers UNIMPLEMENTED.
   */
  renewLeases?(call: RenewLeasesCall, context: CallContext): Promise<{ held: number }>;
  /** Watermark alignment (docs/design.md §12); a server whose handler lacks it answers CONTROLLER_UNAVAILABLE naming it. */
  reportWatermarks?(call: ReportWatermarksCall, context: CallContext): Promise<ReportWatermarksResult>;
}

/**
 * The calls as a server hands them to its handler: field by field, so that a field added to the proto
 * (or anything else a transport carries) never leaks into the handler by accident. Every server
 * (unary gRPC, QuotaStream, in memory) uses these.
 */
export function requestQuotaCallOf(wire: RequestQuotaCall): RequestQuotaCall {
  const { throttlerId, clientId, amount, timestampMs, quotaClassId, requestId, key } = wire;
  // A key only where there is one (keyed throttlers, docs/design.md §11.4): "" on the wire is "not keyed".
  return key
    ? { throttlerId, clientId, amount, timestampMs, quotaClassId, requestId, key }
    : { throttlerId, clientId, amount, timestampMs, quotaClassId, requestId };
}

export function releaseQuotaCallOf(wire: ReleaseQuotaCall): ReleaseQuotaCall {
  const { throttlerId, clientId, amount, quotaClassId, key } = wire;
  return key ? { throttlerId, clientId, amount, quotaClassId, key } : { throttlerId, clientId, amount, quotaClassId };
}

export function renewLeasesCallOf(wire: RenewLeasesCall): RenewLeasesCall {
  return wire.key
    ? { clientId: wire.clientId, throttlerIds: [...wire.throttlerIds], key: wire.key }
    : { clientId: wire.clientId, throttlerIds: [...wire.throttlerIds] };
}

export const RENEW_LEASES_UNIMPLEMENTED = "this controller does not implement RenewLeases (concurrency throttlers)";

/** Field by field, so that nothing else a transport carries leaks across (both transports use it). */
export function reportWatermarksCallOf(wire: { clientId: string; partitions: readonly PartitionWatermarkReport[] }): ReportWatermarksCall {
  return {
    clientId: wire.clientId,
    partitions: wire.partitions.map((p) => ({ groupName: p.groupName, partitionId: p.partitionId, watermarkMs: p.watermarkMs, idle: p.idle, held: p.held })),
  };
}

export function reportWatermarksResultOf(wire: {
  bounds: readonly PartitionBound[];
  groups: readonly GroupWatermarkView[];
  controllerInstance: string;
  settling: boolean;
}): ReportWatermarksResult {
  return {
    bounds: wire.bounds.map((b) => ({ partitionId: b.partitionId, othersWatermarkMs: b.othersWatermarkMs, unbounded: b.unbounded })),
    groups: wire.groups.map((g) => ({ groupName: g.groupName, watermarkMs: g.watermarkMs, partitions: g.partitions, held: g.held, idle: g.idle })),
    controllerInstance: wire.controllerInstance,
    settling: wire.settling,
  };
}

export const REPORT_WATERMARKS_UNIMPLEMENTED =
  "this controller does not implement ReportWatermarks (watermark alignment); upgrade the controller or remove watermark_alignment from the spec";

/**
 * What DescribeThrottlers answers for (docs/design.md §11.4): nothing set, every throttler; a throttler id,
 * that throttler only; and a key, that key of a keyed throttler as well.
 */
export interface DescribeThrottlersFilter {
  readonly throttlerId?: string;
  readonly key?: string;
}

/** The filter of a DescribeThrottlers request off the wire ("" fields are absent). */
export function describeFilterOf(request: { readonly throttlerId?: string; readonly key?: string } | undefined): DescribeThrottlersFilter {
  return { ...(request?.throttlerId ? { throttlerId: request.throttlerId } : {}), ...(request?.key ? { key: request.key } : {}) };
}
