import { controllerAddressesOf } from "@sluice/spec";
import { controllerClient, parseControllerList } from "../controller-client.ts";
import { EXIT_FAILURE, type Cli } from "../cli.ts";
import { createKafkaIo } from "../kafka-io.ts";
import { loadPipelineSpec } from "../load-spec.ts";
import { runSession } from "../pipeline-session.ts";
import { withBrokers } from "../brokers-option.ts";
import { httpEndpointWarning, serveWorkerMetrics } from "../status-endpoints.ts";
import { loadClientTls, loadHttpTls, type ClientTlsFlags } from "../tls-options.ts";
import { workerService } from "../traced-services.ts";
import { startTracing } from "../tracing.ts";
import { CONTROLLER_TOKEN_ENV } from "./controller.ts";

export interface WorkerOptions extends ClientTlsFlags {
  readonly quiet?: boolean;
  readonly workerId?: string;
  readonly controller?: string;
  readonly token?: string;
  readonly otlp?: string;
  readonly brokers?: string[];
  readonly metricsPort?: number;
  readonly metricsHost: string;
  readonly metricsTlsCert?: string;
  readonly metricsTlsKey?: string;
  readonly metricsOpen?: boolean;
}

const METRICS_TLS_FLAGS = { cert: "--metrics-tls-cert", key: "--metrics-tls-key" } as const;

export async function workerAction(cli: Cli, specPath: string, options: WorkerOptions): Promise<void> {
  const loaded = await loadPipelineSpec(specPath, { beforeModules: cli.beforeSpecModules });
  if (!loaded.ok) {
    for (const issue of loaded.issues) cli.stderr(`✗ ${issue.path}: ${issue.message}\n`);
    cli.setExitCode(EXIT_FAILURE);
    return;
  }
  const { specDir } = loaded;
  const spec = withBrokers(loaded.spec, options.brokers);
  const addresses = options.controller !== undefined ? parseControllerList(options.controller) : controllerAddressesOf(spec.controller);
  const address = addresses[0];
  const problems = [
    ...(spec.kafka ? [] : ["the spec has no kafka section: a worker shares streams with other workers through Kafka (use `sluice run` for in-memory streams)"]),
    ...(address
      ? []
      : [
          "no controller: set controller.address (or controller.addresses) in the spec or pass --controller host:port[,host:port…] (start one with `sluice controller`)",
        ]),
  ];
  if (problems.length > 0 || !address) {
    for (const problem of problems) cli.stderr(`✗ ${problem}\n`);
    cli.setExitCode(EXIT_FAILURE);
    return;
  }
  const token = options.token ?? (process.env[CONTROLLER_TOKEN_ENV] || undefined);
  let tls: Awaited<ReturnType<typeof loadClientTls>>;
  let metricsTls: Awaited<ReturnType<typeof loadHttpTls>>;
  try {
    tls = await loadClientTls(options, { tls: spec.controller?.tls, dir: specDir });
    metricsTls = await loadHttpTls({ cert: options.metricsTlsCert, key: options.metricsTlsKey }, METRICS_TLS_FLAGS);
  } catch (error) {
    cli.stderr(`✗ ${error instanceof Error ? error.message : String(error)}\n`);
    cli.setExitCode(EXIT_FAILURE);
    return;
  }
  const metricsEndpoint = { host: options.metricsHost, port: options.metricsPort ?? 0, tls: metricsTls, token, openMetrics: options.metricsOpen === true };
  const warning =
    options.metricsPort !== undefined
      ? httpEndpointWarning(metricsEndpoint, "the --metrics-port server", "--metrics-tls-cert and --metrics-tls-key")
      : undefined;
  if (warning !== undefined) cli.stderr(`sluice worker: ${warning}\n`);
  const tracing = await startTracing({ ...(options.otlp ? { otlp: options.otlp } : {}), service: workerService(spec, options.workerId) });
  if (tracing.enabled) cli.stdout(`sluice worker: ${tracing.description}\n`);
  const bound = spec.controller?.max_open_calls_per_stream;
  const client = controllerClient(
    addresses,
    { ...(token !== undefined ? { token } : {}), ...(tls !== undefined ? { tls } : {}), ...(bound !== undefined ? { maxOpenCallsPerStream: bound } : {}) },
    (line) => cli.stdout(`sluice worker: ${line}\n`),
  );
  const code = await runSession({
    spec,
    specDir,
    io: await createKafkaIo(spec),
    quotaClient: () => client,
    ...(options.workerId ? { workerId: options.workerId } : {}),
    quiet: options.quiet === true,
    cli,
    ...(options.metricsPort !== undefined
      ? {
          serve: (worker) => serveWorkerMetrics(worker, spec.pipeline, metricsEndpoint, (line) => cli.stdout(`sluice worker: ${line}\n`)),
        }
      : {}),
    cleanup: async () => client.close(),
    // After the summary: an unreachable collector may hold the exit for SHUTDOWN_TIMEOUT_MS.
  }).finally(() => tracing.shutdown());
  cli.setExitCode(code);
}
