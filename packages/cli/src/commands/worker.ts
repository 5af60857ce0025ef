import { controllerAddressesOf } from "@sluice/spec";
import { controllerClient, parseControllerList } from "../controller-client.ts";
import { EXIT_FAILURE, type CommandRegistration } from "../cli.ts";
import { createKafkaIo } from "../kafka-io.ts";
import { loadPipelineSpec } from "../load-spec.ts";
import { runSession } from "../pipeline-session.ts";
import { parseBrokers, withBrokers } from "../brokers-option.ts";
import { DEFAULT_HTTP_HOST, parseHttpPort, serveWorkerMetrics } from "../status-endpoints.ts";
import { workerService } from "../traced-services.ts";
import { OTLP_OPTION_DESCRIPTION, parseOtlpUrl, startTracing } from "../tracing.ts";

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
    .option("--otlp <url>", OTLP_OPTION_DESCRIPTION, parseOtlpUrl)
    .action(async (specPath: string, options: { quiet?: boolean; workerId?: string; controller?: string; otlp?: string; brokers?: string[]; metricsPort?: number; metricsHost: string }) => {
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
        ...(spec.kafka ? [] : ["the spec has no kafka section: a worker shares streams with other workers through Kafka (use `sluice run` for in-memory streams)"]),
        ...(address ? [] : ["no controller: set controller.address (or controller.addresses) in the spec or pass --controller host:port[,host:port…] (start one with `sluice controller`)"]),
      ];
      if (problems.length > 0 || !address) {
        for (const problem of problems) cli.stderr(`✗ ${problem}\n`);
        cli.setExitCode(EXIT_FAILURE);
        return;
      }
      const tracing = await startTracing({ ...(options.otlp ? { otlp: options.otlp } : {}), service: workerService(spec, options.workerId) });
      if (tracing.enabled) cli.stdout(`sluice worker: ${tracing.description}\n`);
      const client = controllerClient(addresses, {}, (line) => cli.stdout(`sluice worker: ${line}\n`));
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
              serve: (worker) =>
                serveWorkerMetrics(worker, spec.pipeline, { host: options.metricsHost, port: options.metricsPort ?? 0 }, (line) =>
                  cli.stdout(`sluice worker: ${line}\n`),
                ),
            }
          : {}),
        cleanup: async () => client.close(),
        // After the summary: an unreachable collector may hold the exit for SHUTDOWN_TIMEOUT_MS.
      }).finally(() => tracing.shutdown());
      cli.setExitCode(code);
    });
};
