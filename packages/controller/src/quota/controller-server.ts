import type { Tracer } from "@opentelemetry/api";
import { systemClock, type Clock } from "@sluice/core";
import { serveQuotaService, type ServerTlsOptions } from "@sluice/protocol";
import { CONTROLLER_DEFAULTS, type PipelineSpec } from "@sluice/spec";
import { Controller, type ControllerOptions } from "./controller.ts";

export interface StartControllerOptions {
  /** A validated pipeline spec: its dynamic_spec is version 1, its computations bound later updates. */
  readonly spec: PipelineSpec;
  /** Default 127.0.0.1. */
  readonly host?: string;
  /** 0 = any free port. */
  readonly port: number;
  /** Callers must send `authorization: Bearer <token>`. */
  readonly token?: string;
  /** Serve TLS (mutual TLS when it has a clientCa); absent = plaintext. */
  readonly tls?: ServerTlsOptions;
  /** Default: the system clock (call deadlines arrive as epoch ms). */
  readonly clock?: Clock;
  readonly log?: (line: string) => void;
  /** How long close() lets answered calls drain before cutting connections. Default 2000 ms. */
  readonly closeGraceMs?: number;
  /** Tracer of the RequestQuota spans (see ControllerOptions.tracer). */
  readonly tracer?: Tracer;
  /** Directory an adaptive throttler's `load.module` is resolved against (the spec file's). */
  readonly baseDir?: string;
  /** See ControllerOptions.loadSourceOf. */
  readonly loadSourceOf?: ControllerOptions["loadSourceOf"];
}

export interface RunningController {
  readonly controller: Controller;
  /** host:port actually bound. */
  readonly address: string;
  readonly port: number;
  /** Stops accepting calls, fails waiters with CONTROLLER_UNAVAILABLE, shuts the server down. Idempotent. */
  close(): Promise<void>;
}

const DEFAULT_CLOSE_GRACE_MS = 2_000;

/** A Controller for `spec`, served over gRPC. */
export async function startController(options: StartControllerOptions): Promise<RunningController> {
  const controller = new Controller({
    dynamicSpec: options.spec.dynamic_spec,
    computations: Object.keys(options.spec.computations),
    clock: options.clock ?? systemClock,
    ...(options.log ? { log: options.log } : {}),
    ...(options.tracer ? { tracer: options.tracer } : {}),
    ...(options.baseDir !== undefined ? { baseDir: options.baseDir } : {}),
    ...(options.loadSourceOf !== undefined ? { loadSourceOf: options.loadSourceOf } : {}),
  });
  let server: Awaited<ReturnType<typeof serveQuotaService>>;
  try {
    server = await serveQuotaService(controller, {
      port: options.port,
      ...(options.host !== undefined ? { host: options.host } : {}),
      ...(options.token !== undefined ? { token: options.token } : {}),
      ...(options.tls !== undefined ? { tls: options.tls } : {}),
      maxOpenCallsPerStream: maxOpenCallsPerStreamOf(options.spec),
    });
  } catch (error) {
    controller.close();
    throw error;
  }
  const bound = server;
  let closing: Promise<void> | undefined;
  return {
    controller,
    address: bound.address,
    port: bound.port,
    close() {
      closing ??= (async () => {
        // Stop taking calls first, then answer every waiter (CONTROLLER_UNAVAILABLE) so the
        // graceful shutdown has nothing left to wait for; force only what still hangs after the grace.
        const shutdown = bound.close({ graceMs: options.closeGraceMs ?? DEFAULT_CLOSE_GRACE_MS });
        controller.close();
        await shutdown;
      })();
      return closing;
    },
  };
}

/** docs/design.md §5.3: the open calls one QuotaStream may hold, from the spec (its default when the spec has no `controller`). */
export function maxOpenCallsPerStreamOf(spec: Pick<PipelineSpec, "controller">): number {
  return spec.controller?.max_open_calls_per_stream ?? CONTROLLER_DEFAULTS.max_open_calls_per_stream;
}
