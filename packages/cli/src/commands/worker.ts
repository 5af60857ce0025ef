import type { CommandRegistration } from "../cli.ts";
import { parseBrokers } from "../brokers-option.ts";
import { CLIENT_TLS_OPTIONS, DEFAULT_HTTP_HOST, METRICS_OPEN_DESCRIPTION, OTLP_OPTION_DESCRIPTION, parseHttpPort, parseOtlpUrl } from "../command-options.ts";
import { CONTROLLER_TOKEN_ENV } from "./controller.ts";
import type { WorkerOptions } from "./worker-action.ts";

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
      const { workerAction } = await import("./worker-action.ts");
      await workerAction(cli, specPath, options);
    });
};
