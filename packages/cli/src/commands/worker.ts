import { controllerAddressesOf } from "@sluice/spec";
import { controllerClient, parseControllerList } from "../controller-client.ts";
import { EXIT_FAILURE, type CommandRegistration } from "../cli.ts";
import { createKafkaIo } from "../kafka-io.ts";
import { loadPipelineSpec } from "../load-spec.ts";
import { runSession } from "../pipeline-session.ts";
import { parseBrokers, withBrokers } from "../brokers-option.ts";
import { DEFAULT_HTTP_HOST, httpEndpointWarning, METRICS_OPEN_DESCRIPTION, parseHttpPort, serveWorkerMetrics } from "../status-endpoints.ts";
import { CLIENT_TLS_OPTIONS, loadClientTls, loadHttpTls, type ClientTlsFlags } from "../tls-options.ts";
import { workerService } from "../traced-services.ts";
import { OTLP_OPTION_DESCRIPTION, parseOtlpUrl, startTracing } from "../tracing.ts";
import { CONTROLLER_TOKEN_ENV } from "./controller.ts";

interface WorkerOptions extends ClientTlsFlags {
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

export const registerWorker: CommandRegistration = (program, cli) => {
  program
    .command("worker")
    .description("join the pipeline's Kafka consumer groups and run jobs, taking quota from the controller in the spec")
    .argument("<spec.json>", "pipeline spec file (needs kafka and controller.address)")
    .option("--quiet", "no live status line")
    .option("--worker-id <id>", "worker id in job ids and client ids (default: host-pid)")
    .option("--controller <host:port>", "controller address, or several comma-separated for a failover group (overrides controller.address/addresses)")
    .option("--brokers <host:port,...>", "Kafka bootstrap brokers (override kafka.brokers)", parseBrokers)
    .option("--metrics-port <port>", "serve Prometheus /metrics and /healthz over HTTP on this port; 0 picks a free port", parseHttpPort)
    .option("--metrics-host <host>", "interface of the --metrics-port server", DEFAULT_HTTP_HOST)
    .option("--metrics-tls-cert <file>", "serve --metrics-port over https with this PEM certificate; needs --metrics-tls-key")
    .option("--metrics-tls-key <file>", "PEM private key of --metrics-tls-cert")
    .option("--metrics-open", METRICS_OPEN_DESCRIPTION)
    .option("--token <token>", `controller token, also required by --metrics-port (default: $${CONTROLLER_TOKEN_ENV})`)
    .option("--otlp <url>", OTLP_OPTION_DESCRIPTION, parseOtlpUrl)
    .option(...CLIENT_TLS_OPTIONS.ca)
    .option(...CLIENT_TLS_OPTIONS.cert)
    .option(...CLIENT_TLS_OPTIONS.key)
    .option(...CLIENT_TLS_OPTIONS.serverName)
    .action(async (specPath: string, options: WorkerOptions) => {
      const loaded = await loadPipelineSpec(specPath);
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
        ...(spec.kafka
          ? []
          : ["the spec has no kafka section: a worker shares streams with other workers through Kafka (use `sluice run` for in-memory streams)"]),
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
    });
};
