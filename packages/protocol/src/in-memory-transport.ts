import { cancelledError, SluiceError, systemClock, type Clock } from "@sluice/core";
import { type CallSite, clientClosedError, deadlineExceededError, fromGrpcError, streamEndedStatus, toServiceError } from "./error-mapping.ts";
import {
  describeFilterOf,
  type CallContext,
  type CallMetadata,
  type CallOptions,
  type DynamicSpecUpdate,
  type QuotaServiceClient,
  type QuotaServiceHandler,
} from "./quota-service.ts";
import {
  paceFieldsOf,
  RENEW_LEASES_UNIMPLEMENTED,
  REPORT_WATERMARKS_UNIMPLEMENTED,
  reportWatermarksCallOf,
  reportWatermarksResultOf,
} from "./quota-service.ts";
import { toUint64 } from "./uint64.ts";

export interface InMemoryQuotaClientOptions {
  /** Times the call deadlines; `deadlineAt` is read on this clock. Default: the system clock. */
  readonly clock?: Clock;
  /** How the "controller" is named in error messages. */
  readonly name?: string;
}

/**
 * A QuotaServiceClient that calls a handler in the same process, with the gRPC transport's
 * semantics and no sockets: requests and responses are copied through JSON (nothing is shared by
 * reference, and only the proto's fields cross), uint64 fields are whole non-negative numbers, the
 * deadline aborts the handler's signal and rejects with the same QUOTA_TIMEOUT as the gRPC client,
 * the caller's abort becomes CANCELLED, and errors take the same round trip through error-mapping.
 * For embedded mode and for running one contract suite against both transports.
 */
export function createInMemoryQuotaClient(handler: QuotaServiceHandler, options: InMemoryQuotaClientOptions = {}): QuotaServiceClient {
  const clock = options.clock ?? systemClock;
  const address = options.name ?? "in-memory controller";
  /** Calls in flight; `close()` fails them the way a dropped connection would. */
  const active = new Set<{ fail(): void }>();
  let closed = false;

  const closedError = (method: string) => clientClosedError(address, method);

  function unary<T>(method: string, callOptions: CallOptions | undefined, run: (context: CallContext) => Promise<T>): Promise<T> {
    const signal = callOptions?.signal;
    const deadlineAt = callOptions?.deadlineAt;
    const site: CallSite = { method, address, deadlineAt, signal };
    if (closed) return Promise.reject(closedError(method));
    if (signal?.aborted) return Promise.reject(cancelledError(signal, `${method} to the controller at ${address}`));
    const server = new AbortController();
    const context: CallContext = {
      deadlineAt: deadlineAt ?? null,
      signal: server.signal,
      metadata: wireCopy<CallMetadata>({ ...callOptions?.metadata }),
    };
    return new Promise<T>((resolve, reject) => {
      const deadlineTimer = new AbortController();
      let settled = false;
      const finish = (outcome: () => void) => {
        if (settled) return;
        settled = true;
        deadlineTimer.abort();
        signal?.removeEventListener("abort", onAbort);
        active.delete(entry);
        outcome();
      };
      const entry = {
        fail() {
          server.abort(new Error("the client closed its connection"));
          finish(() => reject(closedError(method)));
        },
      };
      const onAbort = () => {
        server.abort(new Error("the client cancelled the call or its connection dropped"));
        finish(() => reject(signal ? cancelledError(signal, `${method} to the controller at ${address}`) : closedError(method)));
      };
      active.add(entry);
      signal?.addEventListener("abort", onAbort, { once: true });
      if (deadlineAt !== undefined) {
        clock.sleep(Math.max(0, deadlineAt - clock.now()), deadlineTimer.signal).then(
          () => {
            server.abort(new Error("the call's deadline passed"));
            finish(() => reject(deadlineExceededError(site)));
          },
          () => {
            /* answered before the deadline */
          },
        );
      }
      Promise.resolve()
        .then(() => run(context))
        .then(
          (value) => finish(() => resolve(wireCopy(value))),
          // The same round trip as over gRPC: status + metadata on the server, SluiceError on the client.
          (error: unknown) => finish(() => reject(fromGrpcError(toServiceError(error), site))),
        );
    });
  }

  return {
    requestQuota(call, callOptions) {
      const request = wireCopy({
        throttlerId: call.throttlerId,
        clientId: call.clientId,
        amount: call.amount,
        timestampMs: toUint64(call.timestampMs),
        quotaClassId: call.quotaClassId,
        requestId: call.requestId,
        ...(call.key ? { key: call.key } : {}),
      });
      return unary("RequestQuota", callOptions, async (context) => {
        const result = await handler.requestQuota(request, context);
        return { granted: result.granted, waitedMs: toUint64(result.waitedMs), ...paceFieldsOf(result) };
      });
    },

    releaseQuota(call, callOptions) {
      const request = wireCopy({
        throttlerId: call.throttlerId,
        clientId: call.clientId,
        amount: call.amount,
        quotaClassId: call.quotaClassId,
        ...(call.key ? { key: call.key } : {}),
      });
      return unary("ReleaseQuota", callOptions, async (context) => {
        await handler.releaseQuota(request, context);
      });
    },

    renewLeases(call, callOptions) {
      const request = wireCopy({ clientId: call.clientId, throttlerIds: [...call.throttlerIds], ...(call.key ? { key: call.key } : {}) });
      return unary("RenewLeases", callOptions, async (context) => {
        if (!handler.renewLeases) throw new SluiceError("CONTROLLER_UNAVAILABLE", RENEW_LEASES_UNIMPLEMENTED);
        return await handler.renewLeases(request, context);
      });
    },

    reportWatermarks(call, callOptions) {
      const request = wireCopy(
        reportWatermarksCallOf({ clientId: call.clientId, partitions: call.partitions.map((p) => ({ ...p, watermarkMs: toUint64(p.watermarkMs) })) }),
      );
      return unary("ReportWatermarks", callOptions, async (context) => {
        if (!handler.reportWatermarks) throw new SluiceError("CONTROLLER_UNAVAILABLE", REPORT_WATERMARKS_UNIMPLEMENTED);
        return reportWatermarksResultOf(await handler.reportWatermarks(request, context));
      });
    },

    updateDynamicSpec(dynamicSpecJson, callOptions) {
      const json = String(dynamicSpecJson);
      return unary("UpdateDynamicSpec", callOptions, async (context) => {
        const { version } = await handler.updateDynamicSpec(json, context);
        return { version: toUint64(version) };
      });
    },

    describeThrottlers(callOptions, filter) {
      return unary("DescribeThrottlers", callOptions, async (context) => {
        const { snapshotJson } = await handler.describeThrottlers(context, describeFilterOf(filter));
        return { snapshotJson };
      });
    },

    watchDynamicSpec(clientId, onUpdate, signal) {
      const method = "WatchDynamicSpec";
      const site: CallSite = { method, address, signal };
      if (closed) return Promise.reject(closedError(method));
      if (signal.aborted) return Promise.resolve();
      const server = new AbortController();
      const context: CallContext = { deadlineAt: null, signal: server.signal, metadata: {} };
      return new Promise<void>((resolve, reject) => {
        let settled = false;
        const finish = (outcome: () => void) => {
          if (settled) return;
          settled = true;
          signal.removeEventListener("abort", onAbort);
          active.delete(entry);
          outcome();
        };
        const entry = {
          fail() {
            server.abort(new Error("the client closed its connection"));
            finish(() => reject(closedError(method)));
          },
        };
        const onAbort = () => {
          server.abort(new Error("the client cancelled the call or its connection dropped"));
          finish(resolve);
        };
        active.add(entry);
        signal.addEventListener("abort", onAbort, { once: true });
        // Delivered on a later microtask, in order, as a network would: the handler never runs the
        // caller's callback inside its own bookkeeping.
        const emit = (update: DynamicSpecUpdate) => {
          if (settled) return;
          const copy = wireCopy({ version: toUint64(update.version), dynamicSpecJson: String(update.dynamicSpecJson) });
          queueMicrotask(() => {
            if (settled) return;
            try {
              onUpdate(copy);
            } catch (error) {
              server.abort(new Error("the client stopped watching"));
              finish(() => reject(error));
            }
          });
        };
        let ended: void | Promise<void>;
        try {
          ended = handler.watchDynamicSpec(String(clientId), emit, context);
        } catch (error) {
          finish(() => reject(fromGrpcError(toServiceError(error), site)));
          return;
        }
        if (ended === undefined) return;
        ended.then(
          () => finish(() => reject(fromGrpcError(streamEndedStatus(), site))),
          (error: unknown) => finish(() => reject(fromGrpcError(toServiceError(error), site))),
        );
      });
    },

    close() {
      if (closed) return;
      closed = true;
      for (const call of [...active]) call.fail();
    },
  };
}

/**
 * A deep copy through JSON, as the wire would make it. A proto double carries NaN and ±Infinity
 * while JSON turns them into null, so those are tagged on the way in and restored on the way out:
 * a NaN amount must reach the handler as NaN over either transport.
 */
export function wireCopy<T>(value: T): T {
  const text = JSON.stringify(value, (_key, item: unknown) => (typeof item === "number" && !Number.isFinite(item) ? { [NON_FINITE_TAG]: String(item) } : item));
  if (text === undefined) return value;
  return JSON.parse(text, (_key, item: unknown) => {
    if (typeof item === "object" && item !== null && Object.hasOwn(item, NON_FINITE_TAG)) {
      return Number((item as Record<string, unknown>)[NON_FINITE_TAG]);
    }
    return item;
  }) as T;
}

const NON_FINITE_TAG = "~non-finite-number";
