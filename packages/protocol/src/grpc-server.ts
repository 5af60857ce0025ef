import { Server, type Metadata, type ServerUnaryCall, type ServerWritableStream, type sendUnaryData, type UntypedServiceImplementation } from "@grpc/grpc-js";
import { SluiceError, systemClock } from "@sluice/core";
import { timingSafeEqual } from "node:crypto";
import { AUTHORIZATION_METADATA_KEY, bearer, fromGrpcMetadata } from "./call-metadata.ts";
import { deadlineAnswer, receivedCallerDeadline } from "./call-deadline.ts";
import { toServiceError } from "./error-mapping.ts";
import { OpenQuotaStreams, quotaStreamMethod } from "./quota-stream-server.ts";
import { checkedServiceDefinition, UndecodableRequest, type CheckedUpdateDynamicSpecRequest } from "./request-decoding.ts";
import { fromGrpcDeadline } from "./grpc-deadline.ts";
import {
  quotaServiceDefinition,
  type WireDescribeThrottlersRequest,
  type WireDescribeThrottlersResponse,
  type WireDynamicSpecUpdate,
  type WireReleaseQuotaRequest,
  type WireReleaseQuotaResponse,
  type WireRenewLeasesRequest,
  type WireRenewLeasesResponse,
  type WireReportWatermarksRequest,
  type WireReportWatermarksResponse,
  type WireRequestQuotaRequest,
  type WireRequestQuotaResponse,
  type WireUpdateDynamicSpecResponse,
  type WireWatchDynamicSpecRequest,
} from "./proto-definition.ts";
import {
  describeFilterOf,
  releaseQuotaCallOf,
  RENEW_LEASES_UNIMPLEMENTED,
  renewLeasesCallOf,
  REPORT_WATERMARKS_UNIMPLEMENTED,
  reportWatermarksCallOf,
  reportWatermarksResultOf,
  requestQuotaCallOf,
  type CallContext,
  type DynamicSpecUpdate,
  type QuotaServiceHandler,
} from "./quota-service.ts";
import { serverCredentials, type ServerTlsOptions } from "./tls-credentials.ts";
import { toUint64 } from "./uint64.ts";
import { wireRequestQuotaResponseOf } from "./wire-answers.ts";

export interface ServeOptions {
  /** Interface to listen on; loopback unless told otherwise, so a controller is never exposed by accident. */
  readonly host?: string;
  /** 0 = any free port (the bound port is returned). */
  readonly port: number;
  /** When set, every call must carry metadata `authorization: Bearer <token>`. */
  readonly token?: string;
  /** Serve TLS with this certificate (and require client certificates when it has a clientCa); absent = plaintext. */
  readonly tls?: ServerTlsOptions;
  /**
   * docs/design.md §5.3: calls one QuotaStream may hold open (spec `controller.max_open_calls_per_stream`);
   * more are refused at once with TOO_MANY_CALLS. Default DEFAULT_MAX_OPEN_CALLS_PER_STREAM.
   */
  readonly maxOpenCallsPerStream?: number;
}

export interface QuotaServer {
  /** host:port actually bound. */
  readonly address: string;
  readonly port: number;
  /**
   * Stops accepting calls, lets running ones finish for `graceMs` (default 5000), then cancels the
   * rest (their handlers' signals abort). Idempotent.
   */
  close(options?: { graceMs?: number }): Promise<void>;
}

export const DEFAULT_HOST = "127.0.0.1";
const DEFAULT_CLOSE_GRACE_MS = 5_000;

/** Serves `handler` as sluice.throttler.v1.QuotaService over gRPC (HTTP/2, with TLS when `options.tls` is set). */
export async function serveQuotaService(handler: QuotaServiceHandler, options: ServeOptions): Promise<QuotaServer> {
  const host = options.host ?? DEFAULT_HOST;
  const hostPart = host.includes(":") ? `[${host}]` : host;
  const server = new Server();
  const definition = checkedServiceDefinition(quotaServiceDefinition());
  const authorize = bearerCheck(options.token);
  // Built before binding, so a certificate and key that do not belong together fail here, by name.
  const listenCredentials = serverCredentials(options.tls);
  const quotaStreams = new OpenQuotaStreams();

  const implementation = {
    RequestQuota: unary(
      authorize,
      async (request: WireRequestQuotaRequest, context): Promise<WireRequestQuotaResponse> =>
        wireRequestQuotaResponseOf(await handler.requestQuota(requestQuotaCallOf(request), context)),
    ),
    ReleaseQuota: unary(authorize, async (request: WireReleaseQuotaRequest, context): Promise<WireReleaseQuotaResponse> => {
      await handler.releaseQuota(releaseQuotaCallOf(request), context);
      return {};
    }),
    RenewLeases: unary(authorize, async (request: WireRenewLeasesRequest, context): Promise<WireRenewLeasesResponse> => {
      if (!handler.renewLeases) throw new SluiceError("CONTROLLER_UNAVAILABLE", RENEW_LEASES_UNIMPLEMENTED);
      const result = await handler.renewLeases(renewLeasesCallOf(request), context);
      return { held: result.held };
    }),
    ReportWatermarks: unary(authorize, async (request: WireReportWatermarksRequest, context): Promise<WireReportWatermarksResponse> => {
      if (!handler.reportWatermarks) throw new SluiceError("CONTROLLER_UNAVAILABLE", REPORT_WATERMARKS_UNIMPLEMENTED);
      const result = reportWatermarksResultOf(await handler.reportWatermarks(reportWatermarksCallOf(request), context));
      return {
        bounds: result.bounds.map((b) => ({ ...b, othersWatermarkMs: toUint64(b.othersWatermarkMs) })),
        groups: result.groups.map((g) => ({ ...g, watermarkMs: toUint64(g.watermarkMs) })),
        controllerInstance: result.controllerInstance,
        settling: result.settling,
      };
    }),
    UpdateDynamicSpec: unary(authorize, async (request: CheckedUpdateDynamicSpecRequest, context): Promise<WireUpdateDynamicSpecResponse> => {
      if (request.encodingProblem) throw request.encodingProblem;
      const { version } = await handler.updateDynamicSpec(request.dynamicSpecJson, context);
      return { version: toUint64(version) };
    }),
    DescribeThrottlers: unary(authorize, async (request: WireDescribeThrottlersRequest, context): Promise<WireDescribeThrottlersResponse> => {
      const { snapshotJson } = await handler.describeThrottlers(context, describeFilterOf(request));
      return { snapshotJson };
    }),
    // All of a worker's quota traffic on one stream (quota-stream-server.ts), with the handlers above.
    QuotaStream: quotaStreamMethod(handler, authorize, quotaStreams, options.maxOpenCallsPerStream),
    WatchDynamicSpec: (call: ServerWritableStream<WireWatchDynamicSpecRequest, WireDynamicSpecUpdate>) => {
      const { context, dispose } = callContext(call);
      const refusal = authorize(call.metadata.get(AUTHORIZATION_METADATA_KEY)[0]);
      if (refusal) {
        dispose();
        call.emit("error", toServiceError(refusal));
        return;
      }
      const request: unknown = call.request;
      if (request instanceof UndecodableRequest) {
        dispose();
        call.emit("error", toServiceError(request.error));
        return;
      }
      const emit = (update: DynamicSpecUpdate) => {
        if (call.cancelled || call.writableEnded) return;
        call.write({ version: toUint64(update.version), dynamicSpecJson: update.dynamicSpecJson });
      };
      const fail = (error: unknown) => {
        dispose();
        if (!call.cancelled && !call.writableEnded) call.emit("error", toServiceError(error));
      };
      // The handler returns nothing (the stream lives until the client cancels) or a promise that
      // settles when the handler ends the stream: resolved = end cleanly, rejected = end with that
      // error (e.g. CONTROLLER_UNAVAILABLE when the controller shuts down, so clients reconnect).
      let ended: void | Promise<void>;
      try {
        ended = handler.watchDynamicSpec(call.request.clientId, emit, context);
      } catch (error) {
        fail(error);
        return;
      }
      if (ended === undefined) return;
      ended.then(() => {
        dispose();
        if (!call.cancelled && !call.writableEnded) call.end();
      }, fail);
    },
  } satisfies UntypedServiceImplementation;

  server.addService(definition, implementation);

  const port = await new Promise<number>((resolve, reject) => {
    server.bindAsync(`${hostPart}:${options.port}`, listenCredentials, (error, bound) => {
      if (error) {
        reject(
          new SluiceError(
            "CONTROLLER_UNAVAILABLE",
            `cannot listen on ${hostPart}:${options.port}: ${error.message}; choose another --port or stop what is using it`,
            { host, port: options.port },
            { cause: error },
          ),
        );
      } else resolve(bound);
    });
  });

  let closing: Promise<void> | undefined;
  return {
    address: `${hostPart}:${port}`,
    port,
    close({ graceMs = DEFAULT_CLOSE_GRACE_MS } = {}) {
      closing ??= new Promise<void>((resolve) => {
        const grace = new AbortController();
        // A quota stream lives as long as its worker: ended here as soon as its open calls are
        // answered (the handler answers its waiters as it shuts down), or the shutdown would wait
        // for the whole grace.
        quotaStreams.closeAll();
        server.tryShutdown(() => {
          grace.abort();
          resolve();
        });
        systemClock.sleep(graceMs, grace.signal).then(
          () => {
            // Calls still running after the grace (a client that never reads, a stuck handler) are
            // cancelled so that close always finishes.
            server.forceShutdown();
            resolve();
          },
          () => {
            /* shut down within the grace */
          },
        );
      });
      return closing;
    },
  };
}

type Authorize = (header: unknown) => SluiceError | null;

function bearerCheck(token: string | undefined): Authorize {
  if (token === undefined) return () => null;
  const expected = Buffer.from(bearer(token));
  return (header) => {
    if (typeof header !== "string" || header === "") {
      return new SluiceError(
        "UNAUTHENTICATED",
        `this controller requires a token: send metadata "${AUTHORIZATION_METADATA_KEY}: Bearer <token>" ` + "(sluice: --token or SLUICE_CONTROLLER_TOKEN)",
      );
    }
    const given = Buffer.from(header);
    // Constant-time comparison, so response timing does not reveal how much of a guess was right.
    if (given.length !== expected.length || !timingSafeEqual(given, expected)) {
      return new SluiceError(
        "UNAUTHENTICATED",
        `the token in metadata "${AUTHORIZATION_METADATA_KEY}" does not match this controller's token; ` +
          "check --token or SLUICE_CONTROLLER_TOKEN on both sides",
      );
    }
    return null;
  };
}

function unary<Request, Response>(
  authorize: Authorize,
  run: (request: Request, context: CallContext) => Promise<Response>,
): (call: ServerUnaryCall<Request, Response>, callback: sendUnaryData<Response>) => void {
  return (call, callback) => {
    const { context, dispose, expire } = callContext(call);
    let answered = false;
    const answer = (error: unknown, response?: Response) => {
      if (answered) return;
      answered = true;
      dispose();
      if (error !== null || response === undefined) callback(toServiceError(error));
      else callback(null, response);
    };
    const refusal = authorize(call.metadata.get(AUTHORIZATION_METADATA_KEY)[0]);
    if (refusal) {
      answer(refusal);
      return;
    }
    const request: unknown = call.request;
    if (request instanceof UndecodableRequest) {
      answer(request.error);
      return;
    }
    // The call ends at the caller's deadline with QUOTA_TIMEOUT, whether or not the handler watches
    // it (the controller's own QUOTA_TIMEOUT usually comes first and says more), so that the client
    // never has to reset the stream itself (call-deadline.ts).
    expire(() => answer(deadlineAnswer(call.getPath(), context.deadlineAt)));
    // Whatever the handler does — throw synchronously, reject, return garbage — the call gets a
    // status once and the server keeps running; an answer after the deadline's is dropped.
    Promise.resolve()
      .then(() => run(call.request, context))
      .then(
        (response) => answer(null, response),
        (error: unknown) => answer(error ?? new Error("the handler rejected without a reason")),
      );
  };
}

/** What unary and streaming server calls have in common, as far as a CallContext needs. */
interface CancellableCall {
  readonly cancelled: boolean;
  readonly metadata: Metadata;
  getDeadline(): Date | number;
  on(event: "cancelled", listener: () => void): unknown;
  off(event: "cancelled", listener: () => void): unknown;
}

/** The reason of a call's own `disposed` signal; one shared value, as no one reads it. */
const ANSWERED = new Error("the call was answered");

/**
 * The transport-neutral view of one call. `dispose` detaches the cancel listener and the deadline
 * timer once answered; `expire` runs its callback at the call's deadline and then aborts the signal.
 */
function callContext(call: CancellableCall): { context: CallContext; dispose(): void; expire(onDeadline: () => void): void } {
  const abort = new AbortController();
  const disposed = new AbortController();
  const receivedAt = systemClock.now();
  // The transport's deadline is Date-based (grpc-js); on systemClock's base before it is compared.
  const deadlineAt = receivedCallerDeadline(call.metadata, fromGrpcDeadline(call.getDeadline()), receivedAt);
  const onCancel = () => {
    const reason =
      deadlineAt !== null && systemClock.now() >= deadlineAt ? "the call's deadline passed" : "the client cancelled the call or its connection dropped";
    abort.abort(new Error(reason));
  };
  if (call.cancelled) onCancel();
  else call.on("cancelled", onCancel);
  // Metadata is read only by what needs it (the trace context of a RequestQuota span): copying it
  // for every call cost more than the quota decision itself.
  let metadata: Record<string, string> | undefined;
  const context: CallContext = {
    deadlineAt,
    signal: abort.signal,
    get metadata() {
      metadata ??= fromGrpcMetadata(call.metadata);
      return metadata;
    },
  };
  return {
    context,
    dispose: () => {
      disposed.abort(ANSWERED);
      call.off("cancelled", onCancel);
    },
    expire(onDeadline) {
      if (deadlineAt === null || disposed.signal.aborted) return;
      systemClock.sleep(deadlineAt - systemClock.now(), disposed.signal).then(
        () => {
          onDeadline();
          abort.abort(new Error("the call's deadline passed"));
        },
        () => {
          /* answered before the deadline */
        },
      );
    },
  };
}
