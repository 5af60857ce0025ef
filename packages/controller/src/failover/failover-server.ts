import type { Tracer } from "@opentelemetry/api";
import { SluiceError, systemClock, type Clock } from "@sluice/core";
import { serveQuotaService, type QuotaServiceHandler, type ServerTlsOptions } from "@sluice/protocol";
import type { PipelineSpec } from "@sluice/spec";
import type { ControllerElection, ControllerStateStore } from "@sluice/failover-ports";
import { FailoverController } from "./failover-controller.ts";
import { maxOpenCallsPerStreamOf } from "../quota/controller-server.ts";

export interface StartFailoverControllerOptions {
  readonly spec: PipelineSpec;
  /** Directory an adaptive throttler's `load.module` is resolved against (the spec file's). */
  readonly baseDir?: string;
  /** Default 127.0.0.1. */
  readonly host?: string;
  /** 0 = any free port. */
  readonly port: number;
  /** The host:port clients reach this controller at; default the bound address. */
  readonly advertisedAddress?: string;
  readonly token?: string;
  /** Serve gRPC over TLS (mutual TLS with a client CA), as startController does. */
  readonly tls?: ServerTlsOptions;
  readonly clock?: Clock;
  readonly log?: (line: string) => void;
  readonly closeGraceMs?: number;
  readonly tracer?: Tracer;
  /** The Kafka side (packages/kafka), built once the advertised address is known. */
  readonly ports: (address: string) => { readonly store: ControllerStateStore; readonly election: ControllerElection };
  /** See LeaderLease; the CLI takes half of `kafka.session_timeout`. */
  readonly leaseMs: number;
}

export interface RunningFailoverController {
  readonly failover: FailoverController;
  /** The advertised address. */
  readonly address: string;
  readonly port: number;
  /** Leaves the group, fails waiters with CONTROLLER_UNAVAILABLE, shuts the server down. Idempotent. */
  close(): Promise<void>;
}

const DEFAULT_CLOSE_GRACE_MS = 2_000;

/**
 * A controller of a failover group (docs/design.md §5.2), served over gRPC. The server binds first, so the
 * controller can advertise the port it got (port 0), and refuses calls until it has joined.
 */
export async function startFailoverController(options: StartFailoverControllerOptions): Promise<RunningFailoverController> {
  let target: FailoverController | null = null;
  const starting = () => new SluiceError("CONTROLLER_UNAVAILABLE", "this controller is starting and has not joined its group yet; retry in a moment");
  const handler: QuotaServiceHandler = {
    requestQuota: (call, context) => (target ? target.requestQuota(call, context) : Promise.reject(starting())),
    releaseQuota: (call, context) => (target ? target.releaseQuota(call, context) : Promise.reject(starting())),
    renewLeases: (call, context) => (target ? target.renewLeases(call, context) : Promise.reject(starting())),
    watchDynamicSpec: (clientId, emit, context) => (target ? target.watchDynamicSpec(clientId, emit, context) : Promise.reject(starting())),
    updateDynamicSpec: (json, context) => (target ? target.updateDynamicSpec(json, context) : Promise.reject(starting())),
    describeThrottlers: (context, filter) => (target ? target.describeThrottlers(context, filter) : Promise.reject(starting())),
    reportWatermarks: (call, context) => (target ? target.reportWatermarks(call, context) : Promise.reject(starting())),
  };
  const server = await serveQuotaService(handler, {
    port: options.port,
    ...(options.host !== undefined ? { host: options.host } : {}),
    ...(options.token !== undefined ? { token: options.token } : {}),
    ...(options.tls !== undefined ? { tls: options.tls } : {}),
    maxOpenCallsPerStream: maxOpenCallsPerStreamOf(options.spec),
  });
  const address = options.advertisedAddress ?? server.address;
  const { store, election } = options.ports(address);
  const failover = new FailoverController({
    pipeline: options.spec.pipeline,
    dynamicSpec: options.spec.dynamic_spec,
    computations: Object.keys(options.spec.computations),
    clock: options.clock ?? systemClock,
    address,
    store,
    election,
    leaseMs: options.leaseMs,
    ...(options.log ? { log: options.log } : {}),
    ...(options.tracer ? { tracer: options.tracer } : {}),
    ...(options.baseDir !== undefined ? { baseDir: options.baseDir } : {}),
  });
  let closing: Promise<void> | undefined;
  const close = () => {
    closing ??= (async () => {
      const shutdown = server.close({ graceMs: options.closeGraceMs ?? DEFAULT_CLOSE_GRACE_MS });
      await failover.close();
      await shutdown;
    })();
    return closing;
  };
  target = failover; // it refuses calls itself until it leads
  try {
    await failover.start();
  } catch (error) {
    await close();
    throw error;
  }
  return { failover, address, port: server.port, close };
}
