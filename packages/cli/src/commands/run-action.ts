import type { Tracer } from "@opentelemetry/api";
import { systemClock } from "@sluice/core";
import { Controller, startController, type RunningController } from "@sluice/controller";
import { createInMemoryQuotaClient, type QuotaServiceClient } from "@sluice/protocol";
import { controllerAddressesOf, type PipelineSpec } from "@sluice/spec";
import { MemoryIoFactory, type IoFactory, type Worker } from "@sluice/runtime";
import { EXIT_FAILURE, type Cli } from "../cli.ts";
import { controllerClient } from "../controller-client.ts";
import { createKafkaIo } from "../kafka-io.ts";
import { loadPipelineSpec } from "../load-spec.ts";
import { loadSourcesOf, namesLoadModule } from "../load-sources.ts";
import { runSession } from "../pipeline-session.ts";
import { httpEndpointWarning, serveRunStatus } from "../status-endpoints.ts";
import { loadClientTls, loadHttpTls, loadServerTls, TlsOptionError, type ServerTlsFlags } from "../tls-options.ts";
import { CONTROLLER_TOKEN_ENV, HTTP_TLS_FLAGS } from "./controller.ts";
import { runServices } from "../traced-services.ts";
import { startTracing } from "../tracing.ts";

export interface RunOptions extends ServerTlsFlags {
  readonly quiet?: boolean;
  readonly drain?: boolean;
  readonly controllerPort?: string;
  readonly workerId?: string;
  readonly otlp?: string;
  readonly httpPort?: number;
  readonly httpHost: string;
  readonly httpTlsCert?: string;
  readonly httpTlsKey?: string;
  readonly metricsOpen?: boolean;
  readonly token?: string;
}

/** What the TLS flags and the spec's controller.tls come to, read before anything starts. */
interface RunTls {
  readonly server: Awaited<ReturnType<typeof loadServerTls>>;
  readonly http: Awaited<ReturnType<typeof loadHttpTls>>;
  readonly client: Awaited<ReturnType<typeof loadClientTls>>;
}

export async function runAction(cli: Cli, specPath: string, options: RunOptions): Promise<void> {
  const loaded = await loadPipelineSpec(specPath, { beforeModules: cli.beforeSpecModules });
  if (!loaded.ok) {
    for (const issue of loaded.issues) cli.stderr(`✗ ${issue.path}: ${issue.message}\n`);
    cli.setExitCode(EXIT_FAILURE);
    return;
  }
  const { spec, specDir } = loaded;
  if (options.drain && spec.kafka) {
    cli.stderr("--drain works with in-memory streams only: a Kafka topic has no end\n");
    cli.setExitCode(EXIT_FAILURE);
    return;
  }
  const token = options.token ?? (process.env[CONTROLLER_TOKEN_ENV] || undefined);
  let tls: RunTls;
  try {
    tls = await loadRunTls(spec, specDir, options);
  } catch (error) {
    cli.stderr(`✗ ${error instanceof Error ? error.message : String(error)}\n`);
    cli.setExitCode(EXIT_FAILURE);
    return;
  }
  const httpEndpoint = { host: options.httpHost, port: options.httpPort ?? 0, tls: tls.http, token, openMetrics: options.metricsOpen === true };
  const warning =
    options.httpPort !== undefined ? httpEndpointWarning(httpEndpoint, "the --http-port server", "--http-tls-cert and --http-tls-key") : undefined;
  if (warning !== undefined) cli.stderr(`sluice run: ${warning}\n`);
  // Before anything that makes spans; the embedded controller's spans go to a tracer of its own.
  const tracing = await startTracing({ ...(options.otlp ? { otlp: options.otlp } : {}), ...runServices(spec, options.workerId) });
  if (tracing.enabled) cli.stdout(`sluice run: ${tracing.description}\n`);
  const quota = await connectQuota(spec, specDir, options, token, tls, (line) => cli.stdout(`${line}\n`), tracing.embeddedTracer, cli.beforeSpecModules);
  const io: IoFactory = spec.kafka ? await createKafkaIo(spec) : new MemoryIoFactory(spec);
  const code = await runSession({
    spec,
    specDir,
    io,
    quotaClient: () => quota.client,
    ...(options.workerId ? { workerId: options.workerId } : {}),
    quiet: options.quiet === true,
    cli,
    ...(options.httpPort !== undefined
      ? {
          serve: (worker) => serveRunStatus(quota.controller, worker, spec.pipeline, httpEndpoint, (line) => cli.stdout(`sluice run: ${line}\n`)),
        }
      : {}),
    ...(options.drain && io instanceof MemoryIoFactory ? { finished: (worker, generatorsDone) => drained(worker, generatorsDone, io, spec) } : {}),
    cleanup: quota.close,
    // After the summary: an unreachable collector may hold the exit for SHUTDOWN_TIMEOUT_MS.
  }).finally(() => tracing.shutdown());
  cli.setExitCode(code);
}

/** The embedded controller (optionally also served over gRPC), or a connection to the spec's controller. */
async function connectQuota(
  spec: PipelineSpec,
  specDir: string,
  options: RunOptions,
  token: string | undefined,
  tls: RunTls,
  log: (line: string) => void,
  tracer: Tracer | undefined,
  beforeModules: Cli["beforeSpecModules"],
): Promise<{ client: QuotaServiceClient; controller: Controller | null; close: () => Promise<void> }> {
  const addresses = controllerAddressesOf(spec.controller);
  if (addresses.length > 0) {
    const bound = spec.controller?.max_open_calls_per_stream;
    const client = controllerClient(
      addresses,
      {
        ...(token !== undefined ? { token } : {}),
        ...(tls.client !== undefined ? { tls: tls.client } : {}),
        ...(bound !== undefined ? { maxOpenCallsPerStream: bound } : {}),
      },
      log,
    );
    return { client, controller: null, close: async () => client.close() };
  }
  if (namesLoadModule(spec)) await beforeModules?.();
  let served: RunningController | null = null;
  let controller: Controller;
  if (options.controllerPort !== undefined) {
    served = await startController({
      spec,
      baseDir: specDir,
      loadSourceOf: loadSourcesOf(specDir, beforeModules),
      port: Number(options.controllerPort),
      log,
      ...(tracer ? { tracer } : {}),
      ...(token !== undefined ? { token } : {}),
      ...(tls.server !== undefined ? { tls: tls.server } : {}),
    });
    controller = served.controller;
    const secured = [
      ...(token !== undefined ? ["token required"] : []),
      ...(tls.server === undefined ? [] : [tls.server.clientCa !== undefined ? "TLS with client certificates (mTLS)" : "TLS"]),
    ];
    log(`sluice run: embedded controller listening on ${served.address}${secured.length > 0 ? ` (${secured.join(", ")})` : ""}`);
  } else {
    controller = new Controller({
      dynamicSpec: spec.dynamic_spec,
      computations: Object.keys(spec.computations),
      clock: systemClock,
      log,
      baseDir: specDir,
      loadSourceOf: loadSourcesOf(specDir, beforeModules),
      ...(tracer ? { tracer } : {}),
    });
  }
  const client = createInMemoryQuotaClient(controller);
  return {
    client,
    controller,
    close: async () => {
      client.close();
      if (served) await served.close();
      else controller.close();
    },
  };
}

/**
 * The server flags serve --controller-port (and, by default, --http-port); a spec that names
 * controller.address makes this process a client instead, whose TLS is the spec's controller.tls.
 */
async function loadRunTls(spec: PipelineSpec, specDir: string, options: RunOptions): Promise<RunTls> {
  const serverFlags = options.tlsCert !== undefined || options.tlsKey !== undefined || options.tlsClientCa !== undefined;
  if (serverFlags && options.controllerPort === undefined) {
    throw new TlsOptionError(
      spec.controller?.address
        ? "--tls-cert/--tls-key/--tls-client-ca serve the embedded controller's --controller-port; this spec names controller.address, whose TLS is controller.tls in the spec"
        : "--tls-cert/--tls-key/--tls-client-ca serve the embedded controller's gRPC port: add --controller-port <port> (for https on --http-port alone, use --http-tls-cert and --http-tls-key)",
    );
  }
  const server = await loadServerTls(options);
  return {
    server,
    http: await loadHttpTls({ cert: options.httpTlsCert, key: options.httpTlsKey }, HTTP_TLS_FLAGS, server),
    client: spec.controller?.address ? await loadClientTls({}, { tls: spec.controller.tls, dir: specDir }) : undefined,
  };
}

/** Resolves when generators are done and every computation committed to the end of its inputs. */
async function drained(worker: Worker, generatorsDone: () => boolean, io: MemoryIoFactory, spec: PipelineSpec): Promise<void> {
  let quietChecks = 0;
  for (;;) {
    await systemClock.sleep(100);
    const caughtUp = Object.entries(spec.computations).every(([name, computation]) =>
      computation.inputs.every((stream) =>
        Array.from({ length: io.log.partitionCount(stream) }, (_, p) => p).every(
          (p) => io.log.committedOffset(`${spec.pipeline}.${name}`, stream, p) === io.log.endOffset(stream, p),
        ),
      ),
    );
    // Two checks in a row, so a computation fed by another one has seen its last outputs too.
    quietChecks = generatorsDone() && caughtUp && worker.stats().length > 0 ? quietChecks + 1 : 0;
    if (quietChecks >= 2) return;
  }
}
