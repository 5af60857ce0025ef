import { InvalidArgumentError } from "commander";
import type { CommandRegistration } from "../cli.ts";
import { parseBrokers } from "../brokers-option.ts";
import { DEFAULT_HTTP_HOST, METRICS_OPEN_DESCRIPTION, OTLP_OPTION_DESCRIPTION, SERVER_TLS_OPTIONS, parseHttpPort, parseOtlpUrl } from "../command-options.ts";
import type { ControllerOptions } from "./controller-action.ts";

/** The names of the status server's own https flags (it falls back to --tls-cert/--tls-key). */
export const HTTP_TLS_FLAGS = { cert: "--http-tls-cert", key: "--http-tls-key" } as const;

export const DEFAULT_CONTROLLER_PORT = 7070;
/** Read when --token is not given, so the token need not appear in process listings. */
export const CONTROLLER_TOKEN_ENV = "SLUICE_CONTROLLER_TOKEN";

// The action (and the controller, Kafka, gRPC and OpenTelemetry with it) is loaded when it runs.
export const registerController: CommandRegistration = (program, cli) => {
  program
    .command("controller")
    .description("serve the pipeline's throttlers over gRPC: one token bucket per throttler, reconfigurable live")
    .argument("<spec.json>", "pipeline spec file (its dynamic_spec is version 1)")
    .option("--host <host>", "interface to listen on", "127.0.0.1")
    .option("--port <port>", "TCP port; 0 picks a free one", parsePort, DEFAULT_CONTROLLER_PORT)
    .option("--token <token>", `require "authorization: Bearer <token>" on every call (default: $${CONTROLLER_TOKEN_ENV})`)
    .option(
      "--http-port <port>",
      "also serve the live dashboard (/), /api/snapshot, Prometheus /metrics and /healthz over HTTP; 0 picks a free port",
      parseHttpPort,
    )
    .option("--http-host <host>", "interface of the --http-port server", DEFAULT_HTTP_HOST)
    .option("--http-tls-cert <file>", "serve --http-port over https with this PEM certificate (default: --tls-cert's)")
    .option("--http-tls-key <file>", "PEM private key of --http-tls-cert (default: --tls-key's)")
    .option("--metrics-open", METRICS_OPEN_DESCRIPTION)
    .option("--otlp <url>", OTLP_OPTION_DESCRIPTION, parseOtlpUrl)
    .option(...SERVER_TLS_OPTIONS.cert("the gRPC port"))
    .option(...SERVER_TLS_OPTIONS.key)
    .option(...SERVER_TLS_OPTIONS.clientCa)
    .option("--brokers <host:port,...>", "Kafka bootstrap brokers of the failover group (override kafka.brokers)", parseBrokers)
    .option("--advertise <host:port>", "with a kafka section: the address the other controllers' followers send clients to (default: the bound host:port)")
    .action(async (specPath: string, options: ControllerOptions) => {
      const { controllerAction } = await import("./controller-action.ts");
      await controllerAction(cli, specPath, options);
    });
};

function parsePort(value: string): number {
  const port = Number(value);
  if (!/^\d+$/.test(value) || port > 65_535) throw new InvalidArgumentError(`a TCP port is an integer from 0 to 65535, got "${value}"`);
  return port;
}
