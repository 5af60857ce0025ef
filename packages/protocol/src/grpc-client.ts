import { Client, status as GrpcStatus, type CallOptions as GrpcCallOptions, type ChannelOptions, type StatusObject } from "@grpc/grpc-js";
import { cancelledError, SluiceError, systemClock } from "@sluice/core";
import { sendCallerDeadline } from "./call-deadline.ts";
import { toGrpcMetadata } from "./call-metadata.ts";
import { toGrpcDeadline } from "./grpc-deadline.ts";
import { type CallSite, clientClosedError, fromGrpcError, streamEndedStatus } from "./error-mapping.ts";
import { quotaServiceDefinition, type QuotaServiceDefinition, type WireDynamicSpecUpdate } from "./proto-definition.ts";
import { paceFieldsOf, reportWatermarksResultOf, type CallOptions, type DynamicSpecUpdate, type QuotaServiceClient } from "./quota-service.ts";
import { clientChannelCredentials, diagnoseConnection, type ClientTlsOptions } from "./tls-credentials.ts";
import { toUint64 } from "./uint64.ts";

export interface GrpcQuotaClientOptions {
  /** Sent as metadata `authorization: Bearer <token>` on every call. */
  readonly token?: string;
  /** Connect with TLS (and a client certificate for mutual TLS); absent = plaintext HTTP/2. */
  readonly tls?: ClientTlsOptions;
  /** More grpc channel options, over QUOTA_CLIENT_CHANNEL_OPTIONS (e.g. the keepalive of a failover group's client). */
  readonly channelOptions?: ChannelOptions;
  /**
   * QuotaStream only: calls open on the controller at once, more wait in the client (the
   * controller's `controller.max_open_calls_per_stream`; a lower bound is learnt from its refusals).
   * Default DEFAULT_MAX_OPEN_CALLS_PER_STREAM.
   */
  readonly maxOpenCallsPerStream?: number;
}

/**
 * A restarted controller must be found within about a second: reconnect attempts start at 100 ms
 * and back off to at most 1 s (grpc's defaults are 1 s and 120 s). Calls do not wait for a
 * connection — while the controller is down they fail at once with CONTROLLER_UNAVAILABLE, and the
 * runtime's retrying layer decides how long to keep trying (docs/design.md §9.8).
 */
export const QUOTA_CLIENT_CHANNEL_OPTIONS: ChannelOptions = {
  "grpc.initial_reconnect_backoff_ms": 100,
  "grpc.max_reconnect_backoff_ms": 1000,
};

interface ActiveCall {
  cancel(): void;
}

/** A QuotaServiceClient over gRPC to `address` (host:port). Every failure rejects with a SluiceError. */
export function createGrpcQuotaClient(address: string, options: GrpcQuotaClientOptions = {}): QuotaServiceClient {
  const definition = quotaServiceDefinition();
  const channel = clientChannelCredentials(options.tls);
  const client = new Client(address, channel.credentials, { ...QUOTA_CLIENT_CHANNEL_OPTIONS, ...channel.options, ...options.channelOptions });
  const active = new Set<ActiveCall>();
  let closed = false;

  const closedError = (method: string) => clientClosedError(address, method);

  function unary<Method extends keyof QuotaServiceDefinition>(
    method: Method,
    request: Parameters<QuotaServiceDefinition[Method]["requestSerialize"]>[0],
    callOptions: CallOptions | undefined,
  ): Promise<ReturnType<QuotaServiceDefinition[Method]["responseDeserialize"]>> {
    type Response = ReturnType<QuotaServiceDefinition[Method]["responseDeserialize"]>;
    const signal = callOptions?.signal;
    const site: CallSite = { method, address, deadlineAt: callOptions?.deadlineAt, signal };
    if (closed) return Promise.reject(closedError(method));
    if (signal?.aborted) return Promise.reject(cancelledError(signal, `${method} to the controller at ${address}`));
    // Each method definition pairs its own serializer and deserializer; the generic key ties the
    // request and response types to that pair, which TypeScript cannot follow through the union.
    const methodDefinition = definition[method] as unknown as {
      path: string;
      requestSerialize: (value: typeof request) => Buffer;
      responseDeserialize: (bytes: Buffer) => Response;
    };
    const grpcOptions: GrpcCallOptions = {};
    const metadata = toGrpcMetadata(callOptions?.metadata, options.token);
    // The controller answers at the caller's deadline; the transport's own deadline comes a grace
    // later, so a burst of timeouts does not reset streams by the thousand (call-deadline.ts).
    if (callOptions?.deadlineAt !== undefined) grpcOptions.deadline = toGrpcDeadline(sendCallerDeadline(metadata, callOptions.deadlineAt, systemClock.now()));
    metadata.setOptions({ waitForReady: false });
    return new Promise<Response>((resolve, reject) => {
      let entry: ActiveCall | undefined;
      const onAbort = () => entry?.cancel();
      const call = client.makeUnaryRequest<typeof request, Response>(
        methodDefinition.path,
        methodDefinition.requestSerialize,
        methodDefinition.responseDeserialize,
        request,
        metadata,
        grpcOptions,
        (error, response) => {
          signal?.removeEventListener("abort", onAbort);
          if (entry) active.delete(entry);
          if (error || response === undefined) {
            reject(closed && !signal?.aborted ? closedError(method) : transportError(error ?? new Error("empty response"), site, options.tls));
          } else resolve(response);
        },
      );
      entry = { cancel: () => call.cancel() };
      active.add(entry);
      signal?.addEventListener("abort", onAbort, { once: true });
    });
  }

  return {
    async requestQuota(call, callOptions) {
      const response = await unary(
        "RequestQuota",
        {
          throttlerId: call.throttlerId,
          clientId: call.clientId,
          amount: call.amount,
          timestampMs: toUint64(call.timestampMs),
          quotaClassId: call.quotaClassId,
          requestId: call.requestId,
          key: call.key ?? "",
        },
        callOptions,
      );
      return { granted: response.granted, waitedMs: response.waitedMs, ...paceFieldsOf(response) };
    },

    async releaseQuota(call, callOptions) {
      await unary(
        "ReleaseQuota",
        { throttlerId: call.throttlerId, clientId: call.clientId, amount: call.amount, quotaClassId: call.quotaClassId, key: call.key ?? "" },
        callOptions,
      );
    },

    async renewLeases(call, callOptions) {
      const response = await unary("RenewLeases", { clientId: call.clientId, throttlerIds: [...call.throttlerIds], key: call.key ?? "" }, callOptions);
      return { held: response.held };
    },

    async reportWatermarks(call, callOptions) {
      const partitions = call.partitions.map((p) => ({ ...p, watermarkMs: toUint64(p.watermarkMs) }));
      return reportWatermarksResultOf(await unary("ReportWatermarks", { clientId: call.clientId, partitions }, callOptions));
    },

    async updateDynamicSpec(dynamicSpecJson, callOptions) {
      const response = await unary("UpdateDynamicSpec", { dynamicSpecJson }, callOptions);
      return { version: response.version };
    },

    async describeThrottlers(callOptions, filter) {
      const response = await unary("DescribeThrottlers", { throttlerId: filter?.throttlerId ?? "", key: filter?.key ?? "" }, callOptions);
      return { snapshotJson: response.snapshotJson };
    },

    watchDynamicSpec(clientId, onUpdate, signal) {
      const method = "WatchDynamicSpec";
      const site: CallSite = { method, address, signal };
      if (closed) return Promise.reject(closedError(method));
      if (signal.aborted) return Promise.resolve();
      const watch = definition.WatchDynamicSpec;
      const metadata = toGrpcMetadata(undefined, options.token);
      metadata.setOptions({ waitForReady: false });
      return new Promise<void>((resolve, reject) => {
        const stream = client.makeServerStreamRequest(watch.path, watch.requestSerialize, watch.responseDeserialize, { clientId }, metadata);
        const entry: ActiveCall = { cancel: () => stream.cancel() };
        active.add(entry);
        let settled = false;
        const settle = (error: unknown) => {
          if (settled) return;
          settled = true;
          active.delete(entry);
          signal.removeEventListener("abort", onAbort);
          // The caller's own abort is the normal end; anything else means "reconnect".
          if (error instanceof CallbackError) reject(error.cause);
          else if (signal.aborted) resolve();
          else if (closed) reject(closedError(method));
          else reject(transportError(error, site, options.tls));
        };
        const onAbort = () => stream.cancel();
        signal.addEventListener("abort", onAbort, { once: true });
        stream.on("data", (update: WireDynamicSpecUpdate) => {
          const copy: DynamicSpecUpdate = { version: update.version, dynamicSpecJson: update.dynamicSpecJson };
          try {
            onUpdate(copy);
          } catch (error) {
            // The caller's callback failed: stop watching and hand its error back unchanged.
            settle(new CallbackError(error));
            stream.cancel();
          }
        });
        stream.on("error", (error: unknown) => settle(error));
        stream.on("status", (status: StatusObject) => {
          if (status.code !== GrpcStatus.OK) return; // the "error" event carries it
          settle(streamEndedStatus());
        });
      });
    },

    close() {
      if (closed) return;
      closed = true;
      for (const call of [...active]) call.cancel();
      active.clear();
      client.close();
    },
  };
}

/**
 * fromGrpcError, plus what to check when the connection itself failed: a TLS mismatch reaches gRPC
 * as "unavailable", and the message should say which option to look at.
 */
export function transportError(error: unknown, site: CallSite, tls: ClientTlsOptions | undefined): SluiceError {
  const mapped = fromGrpcError(error, site);
  if (mapped.code !== "CONTROLLER_UNAVAILABLE") return mapped;
  const diagnosis = diagnoseConnection(tls, mapped.text);
  if (diagnosis === undefined) return mapped;
  const figures = { ...mapped.details, tls: tls !== undefined };
  if (!diagnosis.settled) return new SluiceError(mapped.code, `${mapped.text}; ${diagnosis.hint}`, figures, { cause: mapped.cause });
  return new SluiceError(
    "UNAUTHENTICATED",
    `the TLS connection to the controller at ${site.address} failed for ${site.method} (${detailsOf(mapped)}): ${diagnosis.hint}; ` +
      "a retry with the same options fails the same way",
    figures,
    { cause: mapped.cause },
  );
}

/** grpc-js's own words, from the CONTROLLER_UNAVAILABLE message fromGrpcError built around them. */
function detailsOf(mapped: SluiceError): string {
  const cause = mapped.cause as { details?: unknown } | undefined;
  const details = typeof cause?.details === "string" ? cause.details : mapped.text;
  // "No connection established. Last error: <what> (<time>). Resolution note: " → <what>
  const last = /Last error: ([\s\S]*?)(?:\s*\(\d{4}-[^)]*\))?\.?\s*Resolution note:/.exec(details)?.[1] ?? details;
  // OpenSSL's "<hex>:error:<code>:SSL routines:<function>:<reason>:<file>:<line>:…" → its reason.
  const openssl = /error:[0-9A-Fa-f]+:[^:]*:[^:]*:([^:]+):/.exec(last)?.[1];
  return (openssl !== undefined ? `TLS: ${openssl}` : last).replace(/\s+/g, " ").trim();
}

/** Wraps what the caller's onUpdate threw, so it is not mistaken for a transport failure. */
class CallbackError {
  constructor(readonly cause: unknown) {}
}
