import { ownEntry, SluiceError, systemClock, type Clock } from "@sluice/core";
import { createQuotaClient, type ClientTlsOptions, type QuotaClientOptions, type QuotaServiceClient, type QuotaTransport } from "@sluice/protocol";
import type { DynamicSpec } from "@sluice/spec";
import { ControllerConnection } from "./controller-connection.ts";
import { DistributedThrottlerFactory } from "./distributed-throttler-factory.ts";
import { DynamicSpecWatcher } from "./dynamic-spec-watcher.ts";
import type { ThrottlerHandle, ThrottlerHandleMetrics } from "./throttler-handle.ts";

// Optional fields also take `undefined`, so that `token: process.env.TOKEN` type-checks under
// exactOptionalPropertyTypes too.
export interface ConnectThrottlersOptions {
  /** `host:port` of `sluice controller`, or several (a leader and its followers, docs/design.md §5.2). */
  readonly controller: string | readonly string[];
  /** Stable id of this caller, sent with every request (e.g. "billing-1"): the controller's metrics name it. */
  readonly clientId: string;
  /** The controller's `--token`: sent as `authorization: Bearer <token>`. */
  readonly token?: string | undefined;
  /**
   * Connect with TLS, as the CLI's `--tls-ca`, `--tls-cert`/`--tls-key` (mutual TLS) and
   * `--tls-server-name` do: PEM contents (`readFileSync("ca.pem")`), not file names. Absent = plaintext.
   */
  readonly tls?: ClientTlsOptions | undefined;
  /**
   * Quota class of this client's requests: one for every throttler, or per throttler id (missing =
   * the throttler's default class). Shares between classes are the controller's (docs/design.md §9.2).
   */
  readonly quotaClass?: string | Readonly<Record<string, string>> | undefined;
  /** How long to wait for the controller's first dynamic_spec before giving up (default 10 s). */
  readonly connectTimeoutMs?: number | undefined;
  /** Where reconnect notices go (default: stderr, prefixed with the client id); null = nowhere. */
  readonly log?: ((line: string) => void) | null | undefined;
  /** For tests in virtual time; the system clock otherwise. */
  readonly clock?: Clock;
  /**
   * How quota calls travel: "stream" (one multiplexed QuotaStream per controller, the default) or
   * "unary" (one RPC per call). Default: the SLUICE_QUOTA_TRANSPORT environment variable, else "stream".
   */
  readonly transport?: QuotaTransport | undefined;
  /** For tests: how to reach one address (default: gRPC, over `transport`). */
  readonly connect?: (address: string, options: QuotaClientOptions) => QuotaServiceClient;
}

/** The distributed throttlers of one controller, as any Node process sees them. */
export interface Throttlers {
  /**
   * The handle of a throttler declared in the controller's dynamic_spec — the same kind a
   * computation's `ctx.getThrottlerOrThrow` returns: prefetching, retrying, valid across
   * reconfiguration. Throws THROTTLER_NOT_DECLARED (with the declared ids) otherwise.
   */
  getThrottlerOrThrow(throttlerId: string): ThrottlerHandle;
  /** The handle, or null when the id is not declared now. */
  tryGetThrottler(throttlerId: string): ThrottlerHandle | null;
  /** The dynamic_spec in force (it follows `sluice reconfigure` live). */
  readonly dynamicSpec: DynamicSpec;
  readonly dynamicSpecVersion: number;
  /** The address calls go to now. */
  readonly controllerAddress: string;
  /** Per-handle sensors: units consumed, released, returned, wait times, RPCs. */
  metrics(): ThrottlerHandleMetrics[];
  /** Fails waiting callers with CANCELLED, returns unused prefetched quota, closes the connection. Idempotent. */
  close(): Promise<void>;
}

const DEFAULT_CONNECT_TIMEOUT_MS = 10_000;
/** A closing pool's ReleaseQuota gets this long before the channels close anyway. */
const RELEASE_GRACE_MS = 2_000;

/**
 * Connects to a controller and resolves once its dynamic_spec has arrived, so every declared
 * throttler can be looked up at once. Rejects with UNAUTHENTICATED (wrong or missing token) at
 * once, and with CONTROLLER_UNAVAILABLE when no dynamic_spec came within `connectTimeoutMs`.
 */
export async function connectThrottlers(options: ConnectThrottlersOptions): Promise<Throttlers> {
  const addresses = controllerAddresses(options.controller);
  const clientId = checkedClientId(options.clientId);
  const clock = options.clock ?? systemClock;
  const log = options.log === undefined ? (line: string) => console.warn(`[sluice client ${clientId}] ${line}`) : options.log;
  const connect = options.connect ?? createQuotaClient;
  const grpcOptions: QuotaClientOptions = {
    ...(options.token !== undefined ? { token: options.token } : {}),
    ...(options.tls !== undefined ? { tls: options.tls } : {}),
    ...(options.transport !== undefined ? { transport: options.transport } : {}),
  };
  const connection = new ControllerConnection(addresses, (address) => connect(address, grpcOptions));

  const quotaClass = options.quotaClass;
  const factory = new DistributedThrottlerFactory({
    computation: clientId,
    clientId,
    client: () => connection.current(),
    clock,
    quotaClass: (throttlerId) => (typeof quotaClass === "string" ? quotaClass : ownEntry(quotaClass, throttlerId)),
  });
  let spec: DynamicSpec = { throttlers: {}, computations: {} };
  const watcher = new DynamicSpecWatcher({
    client: () => connection.current(),
    clientId,
    clock,
    ...(log ? { log } : {}),
    onSpec: (next) => {
      spec = next;
      factory.reconfigure(next);
    },
  });

  let closing: Promise<void> | null = null;
  const close = (): Promise<void> => {
    closing ??= (async () => {
      factory.close(`connectThrottlers() of client "${options.clientId}" was closed (connect again for new handles)`);
      await watcher.close();
      await connection.close(RELEASE_GRACE_MS);
    })();
    return closing;
  };

  try {
    await firstDynamicSpec(watcher, connection, options.connectTimeoutMs ?? DEFAULT_CONNECT_TIMEOUT_MS);
  } catch (error) {
    await close();
    throw error;
  }

  return {
    getThrottlerOrThrow(throttlerId) {
      const handle = factory.tryGetThrottler(throttlerId);
      if (handle) return handle;
      const declared = Object.keys(spec.throttlers);
      throw new SluiceError(
        "THROTTLER_NOT_DECLARED",
        `throttler "${throttlerId}" is not declared in the dynamic_spec of the controller at ${connection.currentAddress} ` +
          `(version ${watcher.currentVersion}; declared: ${declared.length > 0 ? declared.map((id) => `"${id}"`).join(", ") : "none"}); ` +
          "declare it in the pipeline spec or with `sluice reconfigure`",
        { throttlerId, clientId, declared, controller: connection.currentAddress },
      );
    },
    tryGetThrottler: (throttlerId) => factory.tryGetThrottler(throttlerId),
    get dynamicSpec() {
      return spec;
    },
    get dynamicSpecVersion() {
      return watcher.currentVersion;
    },
    get controllerAddress() {
      return connection.currentAddress;
    },
    metrics: () => factory.metrics(),
    close,
  };
}

function firstDynamicSpec(watcher: DynamicSpecWatcher, connection: ControllerConnection, timeoutMs: number): Promise<void> {
  return new Promise<void>((resolve, reject) => {
    const done = (settle: () => void) => {
      clearTimeout(timer);
      stopListening();
      settle();
    };
    const timer = setTimeout(() => {
      const last = connection.lastWatchFailure;
      done(() =>
        reject(
          new SluiceError(
            "CONTROLLER_UNAVAILABLE",
            `no dynamic_spec from the controller at ${connection.addresses.join(", ")} within ${timeoutMs} ms` +
              (last ? ` (last error: ${last.message})` : "") +
              "; check that `sluice controller` runs there and is reachable, then connect again",
            { controller: connection.addresses, timeoutMs, lastCode: last?.code },
            { cause: last ?? undefined },
          ),
        ),
      );
    }, timeoutMs);
    // A refusal that retrying cannot cure (a wrong token) ends the wait at once.
    const stopListening = connection.onWatchFailure((error) => {
      if (!error.retriable) done(() => reject(error));
    });
    watcher.start().then(() => done(resolve));
  });
}

function controllerAddresses(controller: string | readonly string[]): readonly string[] {
  const list = typeof controller === "string" ? [controller] : [...controller];
  if (list.length === 0) throw new TypeError('connectThrottlers: "controller" needs at least one "host:port" address, got an empty list');
  for (const address of list) {
    if (typeof address !== "string" || !/^[^\s:]+:\d{1,5}$|^\[[0-9a-fA-F:]+\]:\d{1,5}$/.test(address)) {
      throw new TypeError(`connectThrottlers: "controller" takes "host:port" addresses such as "127.0.0.1:7070", got ${JSON.stringify(address)}`);
    }
  }
  return list;
}

function checkedClientId(clientId: string): string {
  if (typeof clientId !== "string" || clientId.trim() === "") {
    throw new TypeError(`connectThrottlers: "clientId" must be a non-empty string that names this caller (e.g. "billing-1"), got ${JSON.stringify(clientId)}`);
  }
  return clientId;
}
