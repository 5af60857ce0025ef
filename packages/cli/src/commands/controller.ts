import { startController, startFailoverController, type ControllerSnapshot } from "@sluice/controller";
import { InvalidArgumentError } from "commander";
import { EXIT_FAILURE, EXIT_OK, type CommandRegistration } from "../cli.ts";
import { parseBrokers, withBrokers } from "../brokers-option.ts";
import { kafkaFailoverPorts, leaseMsOf } from "../failover-ports.ts";
import { loadPipelineSpec } from "../load-spec.ts";
import { controllerService } from "../traced-services.ts";
import { OTLP_OPTION_DESCRIPTION, parseOtlpUrl, startTracing, type Tracing } from "../tracing.ts";
import { DEFAULT_HTTP_HOST, httpEndpointWarning, METRICS_OPEN_DESCRIPTION, parseHttpPort, serveControllerStatus } from "../status-endpoints.ts";
import { SERVER_TLS_OPTIONS, clearTokenWarning, isLoopbackHost, loadHttpTls, loadServerTls, type ServerTlsFlags } from "../tls-options.ts";

interface ControllerOptions extends ServerTlsFlags {
  readonly host: string;
  readonly port: number;
  readonly token?: string;
  readonly otlp?: string;
  readonly httpPort?: number;
  readonly httpHost: string;
  readonly httpTlsCert?: string;
  readonly httpTlsKey?: string;
  readonly metricsOpen?: boolean;
  readonly advertise?: string;
  readonly brokers?: string[];
}

/** What the command needs of a plain controller and of one in a failover group alike. */
interface Served {
  readonly address: string;
  readonly status: { snapshot(): ControllerSnapshot };
  describeLimits(): string;
  close(): Promise<void>;
}

/** The names of the status server's own https flags (it falls back to --tls-cert/--tls-key). */
export const HTTP_TLS_FLAGS = { cert: "--http-tls-cert", key: "--http-tls-key" } as const;

export const DEFAULT_CONTROLLER_PORT = 7070;
/** Read when --token is not given, so the token need not appear in process listings. */
export const CONTROLLER_TOKEN_ENV = "SLUICE_CONTROLLER_TOKEN";

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
      const say = (line: string) => cli.stdout(`sluice controller: ${line}\n`);
      const loaded = await loadPipelineSpec(specPath);
      if (!loaded.ok) {
        for (const issue of loaded.issues) cli.stderr(`✗ ${issue.path}: ${issue.message}\n`);
        const count = loaded.issues.length;
        cli.stderr(`sluice controller: not started, ${count} ${count === 1 ? "issue" : "issues"} in ${specPath}\n`);
        cli.setExitCode(EXIT_FAILURE);
        return;
      }
      const spec = withBrokers(loaded.spec, options.brokers);
      const token = options.token ?? nonEmpty(process.env[CONTROLLER_TOKEN_ENV]);
      let running: Served;
      let tracing: Tracing | undefined;
      let tls: Awaited<ReturnType<typeof loadServerTls>>;
      let httpTls: Awaited<ReturnType<typeof loadHttpTls>>;
      try {
        tls = await loadServerTls(options);
        httpTls = await loadHttpTls({ cert: options.httpTlsCert, key: options.httpTlsKey }, HTTP_TLS_FLAGS, tls);
      } catch (error) {
        cli.stderr(`sluice controller: not started: ${error instanceof Error ? error.message : String(error)}\n`);
        cli.setExitCode(EXIT_FAILURE);
        return;
      }
      try {
        // Registered globally: the Controller's default tracer reports to it.
        tracing = await startTracing({ ...(options.otlp ? { otlp: options.otlp } : {}), service: controllerService(spec, {}) });
        if (tracing.enabled) say(tracing.description);
        const common = {
          spec,
          baseDir: loaded.specDir,
          host: options.host,
          port: options.port,
          ...(token !== undefined ? { token } : {}),
          ...(tls !== undefined ? { tls } : {}),
          log: say,
        };
        if (spec.kafka) {
          // docs/design.md §5.2: one of a failover group; its state lives in <pipeline>.controller-state.
          const group = await startFailoverController({
            ...common,
            ...(options.advertise !== undefined ? { advertisedAddress: options.advertise } : {}),
            ports: kafkaFailoverPorts(spec, say),
            leaseMs: leaseMsOf(spec),
          });
          running = {
            address: group.address,
            status: group.failover,
            describeLimits: () => group.failover.current?.describeLimits() ?? "",
            close: () => group.close(),
          };
          say(
            `joined group "${spec.pipeline}.controller" (state in "${spec.pipeline}.controller-state", ` +
              `session timeout ${spec.kafka.session_timeout} ms, lease ${leaseMsOf(spec)} ms); serving once elected`,
          );
        } else {
          const single = await startController(common);
          running = {
            address: single.address,
            status: single.controller,
            describeLimits: () => single.controller.describeLimits(),
            close: () => single.close(),
          };
        }
      } catch (error) {
        cli.stderr(`sluice controller: ${error instanceof Error ? error.message : String(error)}\n`);
        await tracing?.shutdown();
        cli.setExitCode(EXIT_FAILURE);
        return;
      }
      const throttlers = Object.keys(spec.dynamic_spec.throttlers).length;
      const limits = running.describeLimits();
      say(
        `pipeline ${JSON.stringify(spec.pipeline)} listening on ${running.address} ` +
          `(${throttlers} ${throttlers === 1 ? "throttler" : "throttlers"}${limits ? `: ${limits}` : ""})` +
          (token !== undefined ? ", token required" : "") +
          (tls === undefined ? "" : tls.clientCa !== undefined ? ", TLS with client certificates (mTLS)" : ", TLS"),
      );
      if (token !== undefined && tls === undefined && !isLoopbackHost(options.host)) {
        cli.stderr(`sluice controller: ${clearTokenWarning("the gRPC port", options.host, "--tls-cert and --tls-key")}\n`);
      }
      let dashboard: { close(): Promise<void> } | null = null;
      if (options.httpPort !== undefined) {
        try {
          const endpoint = { host: options.httpHost, port: options.httpPort, tls: httpTls, token, openMetrics: options.metricsOpen === true };
          const warning = httpEndpointWarning(endpoint, "the --http-port server", "--http-tls-cert and --http-tls-key (or --tls-cert and --tls-key)");
          if (warning !== undefined) cli.stderr(`sluice controller: ${warning}\n`);
          dashboard = await serveControllerStatus(running.status, spec.pipeline, endpoint, say);
        } catch (error) {
          cli.stderr(`sluice controller: ${error instanceof Error ? error.message : String(error)}\n`);
          await running.close();
          cli.setExitCode(EXIT_FAILURE);
          return;
        }
      }

      const signal = await new Promise<NodeJS.Signals>((resolve) => {
        const onSignal = (received: NodeJS.Signals) => {
          process.off("SIGINT", onSignal);
          process.off("SIGTERM", onSignal);
          resolve(received);
        };
        process.on("SIGINT", onSignal);
        process.on("SIGTERM", onSignal);
      });
      say(`${signal}: shutting down (waiting requests get CONTROLLER_UNAVAILABLE and retry against the next controller)`);
      await dashboard?.close();
      await running.close();
      await tracing.shutdown(); // the answered calls' spans are ended: export them before exiting
      say("stopped");
      cli.setExitCode(EXIT_OK);
    });
};

function parsePort(value: string): number {
  const port = Number(value);
  if (!/^\d+$/.test(value) || port > 65_535) throw new InvalidArgumentError(`a TCP port is an integer from 0 to 65535, got "${value}"`);
  return port;
}

function nonEmpty(value: string | undefined): string | undefined {
  return value === undefined || value === "" ? undefined : value;
}
