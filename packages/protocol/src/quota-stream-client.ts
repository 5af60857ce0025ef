import { Client } from "@grpc/grpc-js";
import { cancelledError, SluiceError, systemClock } from "@sluice/core";
import { DEADLINE_ANSWER_GRACE_MS } from "./call-deadline.ts";
import { toGrpcMetadata } from "./call-metadata.ts";
import { type CallSite, clientClosedError, deadlineExceededError } from "./error-mapping.ts";
import { createGrpcQuotaClient, QUOTA_CLIENT_CHANNEL_OPTIONS, transportError, type GrpcQuotaClientOptions } from "./grpc-client.ts";
import { quotaServiceDefinition, type WireQuotaStreamAnswer, type WireQuotaStreamCall } from "./proto-definition.ts";
import { fromStreamError } from "./quota-stream-errors.ts";
import { callSize, QuotaStreamSession, type QuotaStreamDuplex } from "./quota-stream-session.ts";
import { paceFieldsOf, type CallOptions, type QuotaServiceClient } from "./quota-service.ts";
import { clientChannelCredentials } from "./tls-credentials.ts";
import { toUint64 } from "./uint64.ts";

/**
 * A call whose encoded size could exceed this goes as its unary RPC instead: one oversized message
 * would end the stream, and every call on it, with RESOURCE_EXHAUSTED. (Only ids far past the
 * controller's 1,024-character limit get there; the unary RPC refuses them with INVALID_REQUEST.)
 */
const MAX_STREAM_CALL_BYTES = 256 * 1024;

/** The metadata of a call that carries none: one shared empty object, never written to. */
const NO_METADATA: Record<string, string> = Object.freeze({}) as Record<string, string>;

/**
 * A QuotaServiceClient that carries RequestQuota, ReleaseQuota, RenewLeases and WatchDynamicSpec
 * on one QuotaStream to `address` (quota.proto), the calls of one turn of the event loop in one
 * frame; UpdateDynamicSpec and DescribeThrottlers (an operator's calls, rare) and ReportWatermarks
 * (one call per worker every few seconds) stay unary. Same
 * semantics as createGrpcQuotaClient: request ids, deadlines (the controller answers QUOTA_TIMEOUT
 * at the caller's deadline; this client gives up a grace later), the caller's abort as CANCELLED,
 * and the same SluiceErrors. A stream that ends fails the calls on it as a dropped connection
 * fails unary calls (CONTROLLER_UNAVAILABLE); the caller's retrying layer (or
 * createLeaderFollowingClient) sends them again under the same request ids, and the next call
 * opens a new stream.
 */
export function createStreamQuotaClient(address: string, options: GrpcQuotaClientOptions = {}): QuotaServiceClient {
  const unary = createGrpcQuotaClient(address, options);
  const method = quotaServiceDefinition().QuotaStream;
  const channel = clientChannelCredentials(options.tls);
  const client = new Client(address, channel.credentials, { ...QUOTA_CLIENT_CHANNEL_OPTIONS, ...channel.options, ...options.channelOptions });
  let session: QuotaStreamSession | null = null;
  let nextCallId = 0;
  let closed = false;

  const closedError = (method: string) => clientClosedError(address, method);

  const currentSession = (): QuotaStreamSession => {
    if (session && !session.isEnded) return session;
    const metadata = toGrpcMetadata(undefined, options.token);
    metadata.setOptions({ waitForReady: false });
    const stream: QuotaStreamDuplex = client.makeBidiStreamRequest(method.path, method.requestSerialize, method.responseDeserialize, metadata);
    const opened = new QuotaStreamSession(
      stream,
      (ended) => {
        if (session === ended) session = null;
      },
      options.maxOpenCallsPerStream,
    );
    session = opened;
    return opened;
  };

  /**
   * A call answered once, as its unary RPC would be; `asUnary` sends it as its unary RPC instead
   * when it is too large for a frame.
   */
  function once<T>(
    name: string,
    call: Omit<WireQuotaStreamCall, "callId" | "timeoutMs" | "metadata">,
    callOptions: CallOptions | undefined,
    decode: (answer: WireQuotaStreamAnswer) => T | undefined,
    asUnary: () => Promise<T>,
  ): Promise<T> {
    const metadata = callOptions?.metadata;
    // One copy of the call, its size counted once.
    const entry: WireQuotaStreamCall = { callId: 0, timeoutMs: 0, metadata: metadata ? { ...metadata } : NO_METADATA, ...call };
    const size = callSize(entry);
    if (size > MAX_STREAM_CALL_BYTES) return asUnary();
    const signal = callOptions?.signal;
    const deadlineAt = callOptions?.deadlineAt;
    const site: CallSite = { method: name, address, deadlineAt, signal };
    if (closed) return Promise.reject(closedError(name));
    if (signal?.aborted) return Promise.reject(cancelledError(signal, `${name} to the controller at ${address}`));
    const callId = ++nextCallId;
    entry.callId = callId;
    const on = currentSession();
    return new Promise<T>((resolve, reject) => {
      let timer: NodeJS.Timeout | undefined;
      const done = () => {
        if (timer !== undefined) clearTimeout(timer);
        signal?.removeEventListener("abort", onAbort);
      };
      const onAbort = () => {
        done();
        on.cancel(callId);
        reject(signal ? cancelledError(signal, `${name} to the controller at ${address}`) : closedError(name));
      };
      on.send(
        entry,
        {
          answer(answer) {
            done();
            if (answer.error) reject(fromStreamError(answer.error, site));
            else {
              const value = decode(answer);
              if (value === undefined) reject(unexpectedAnswer(name, address, answer));
              else resolve(value);
            }
            return true;
          },
          fail(cause) {
            done();
            reject(closed && !signal?.aborted ? closedError(name) : transportError(cause, site, options.tls));
          },
        },
        deadlineAt,
        size,
      );
      signal?.addEventListener("abort", onAbort, { once: true });
      // The controller answers at the deadline; this is for a controller that cannot (stuck, cut off).
      if (deadlineAt !== undefined) {
        timer = setTimeout(
          () => {
            done();
            on.cancel(callId);
            reject(deadlineExceededError(site));
          },
          Math.max(0, deadlineAt + DEADLINE_ANSWER_GRACE_MS - systemClock.now()),
        );
      }
    });
  }

  return {
    requestQuota(request, callOptions) {
      const call = {
        requestQuota: {
          throttlerId: request.throttlerId,
          clientId: request.clientId,
          amount: request.amount,
          timestampMs: toUint64(request.timestampMs),
          quotaClassId: request.quotaClassId,
          requestId: request.requestId,
          key: request.key ?? "",
        },
      };
      return once(
        "RequestQuota",
        call,
        callOptions,
        (answer) =>
          answer.requestQuota
            ? { granted: answer.requestQuota.granted, waitedMs: answer.requestQuota.waitedMs, ...paceFieldsOf(answer.requestQuota) }
            : undefined,
        () => unary.requestQuota(request, callOptions),
      );
    },

    releaseQuota(request, callOptions) {
      const call = {
        releaseQuota: {
          throttlerId: request.throttlerId,
          clientId: request.clientId,
          amount: request.amount,
          quotaClassId: request.quotaClassId,
          key: request.key ?? "",
        },
      };
      return once(
        "ReleaseQuota",
        call,
        callOptions,
        (answer) => (answer.releaseQuota ? (true as const) : undefined),
        () => unary.releaseQuota(request, callOptions).then(() => true as const),
      ).then(() => undefined);
    },

    renewLeases(request, callOptions) {
      const call = { renewLeases: { clientId: request.clientId, throttlerIds: [...request.throttlerIds], key: request.key ?? "" } };
      return once(
        "RenewLeases",
        call,
        callOptions,
        (answer) => (answer.renewLeases ? { held: answer.renewLeases.held } : undefined),
        () => unary.renewLeases?.(request, callOptions) ?? Promise.reject(closedError("RenewLeases")),
      );
    },

    // Watermark alignment (docs/design.md §12) reports every few seconds per worker: unary, as before.
    reportWatermarks: (call, callOptions) => unary.reportWatermarks?.(call, callOptions) ?? Promise.reject(closedError("ReportWatermarks")),
    updateDynamicSpec: (json, callOptions) => unary.updateDynamicSpec(json, callOptions),
    describeThrottlers: (callOptions, filter) => unary.describeThrottlers(callOptions, filter),

    watchDynamicSpec(clientId, onUpdate, signal) {
      const name = "WatchDynamicSpec";
      const site: CallSite = { method: name, address, signal };
      if (closed) return Promise.reject(closedError(name));
      if (signal.aborted) return Promise.resolve();
      const call = { watchDynamicSpec: { clientId } };
      if (callSize({ callId: 0, timeoutMs: 0, metadata: NO_METADATA, ...call }) > MAX_STREAM_CALL_BYTES)
        return unary.watchDynamicSpec(clientId, onUpdate, signal);
      const callId = ++nextCallId;
      const on = currentSession();
      return new Promise<void>((resolve, reject) => {
        const onAbort = () => {
          on.cancel(callId);
          resolve();
        };
        const entry: WireQuotaStreamCall = { callId, timeoutMs: 0, metadata: NO_METADATA, ...call };
        on.send(entry, {
          answer(answer) {
            const update = answer.dynamicSpecUpdate;
            if (update) {
              try {
                onUpdate({ version: update.version, dynamicSpecJson: update.dynamicSpecJson });
                return false;
              } catch (error) {
                // The caller's callback failed: stop watching and hand its error back unchanged.
                signal.removeEventListener("abort", onAbort);
                on.cancel(callId);
                reject(error);
                return true;
              }
            }
            signal.removeEventListener("abort", onAbort);
            reject(answer.error ? fromStreamError(answer.error, site) : unexpectedAnswer(name, address, answer));
            return true;
          },
          fail(cause) {
            signal.removeEventListener("abort", onAbort);
            if (signal.aborted) resolve();
            else reject(closed ? closedError(name) : transportError(cause, site, options.tls));
          },
        });
        signal.addEventListener("abort", onAbort, { once: true });
      });
    },

    close() {
      if (closed) return;
      closed = true;
      session?.close(closedError("QuotaStream"));
      session = null;
      unary.close();
      client.close();
    },
  };
}

function unexpectedAnswer(name: string, address: string, answer: WireQuotaStreamAnswer): SluiceError {
  return new SluiceError(
    "CONTROLLER_UNAVAILABLE",
    `the controller at ${address} answered ${name} call ${answer.callId} with ${answer.answer ?? "nothing"}, which is not an answer to ${name}; retry`,
    { address, method: name, callId: answer.callId },
  );
}
