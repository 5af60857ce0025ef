import type { CommandRegistration } from "../cli.ts";
import { DEFAULT_HTTP_HOST, METRICS_OPEN_DESCRIPTION, OTLP_OPTION_DESCRIPTION, SERVER_TLS_OPTIONS, parseHttpPort, parseOtlpUrl } from "../command-options.ts";
import { CONTROLLER_TOKEN_ENV } from "./controller.ts";
import type { RunOptions } from "./run-action.ts";

export const registerRun: CommandRegistration = (program, cli) => {
  program
    .command("run")
    .description(
      "run a whole pipeline in one process: an embedded controller unless the spec names controller.address, " +
        "in-memory streams unless it has a kafka section",
    )
    .argument("<spec.json>", "pipeline spec file")
    .option("--quiet", "no live status line")
    .option("--drain", "exit once the generators finished and every input is processed (in-memory streams only)")
    .option("--controller-port <port>", "also serve the embedded controller over gRPC on 127.0.0.1:<port>, for `sluice reconfigure` and `sluice top`")
    .option("--worker-id <id>", "worker id in job ids and client ids (default: host-pid)")
    .option(
      "--http-port <port>",
      "serve the embedded controller's live dashboard (/) and /api/snapshot, Prometheus /metrics of the controller and the worker, and /healthz on one HTTP port; 0 picks a free port",
      parseHttpPort,
    )
    .option("--http-host <host>", "interface of the --http-port server", DEFAULT_HTTP_HOST)
    .option("--http-tls-cert <file>", "serve --http-port over https with this PEM certificate (default: --tls-cert's)")
    .option("--http-tls-key <file>", "PEM private key of --http-tls-cert (default: --tls-key's)")
    .option("--metrics-open", METRICS_OPEN_DESCRIPTION)
    .option(
      "--token <token>",
      `require "authorization: Bearer <token>" on --controller-port and --http-port; sent to controller.address when the spec names one (default: $${CONTROLLER_TOKEN_ENV})`,
    )
    .option("--otlp <url>", OTLP_OPTION_DESCRIPTION, parseOtlpUrl)
    .option(...SERVER_TLS_OPTIONS.cert("--controller-port"))
    .option(...SERVER_TLS_OPTIONS.key)
    .option(...SERVER_TLS_OPTIONS.clientCa)
    .action(async (specPath: string, options: RunOptions) => {
      const { runAction } = await import("./run-action.ts");
      await runAction(cli, specPath, options);
    });
};
