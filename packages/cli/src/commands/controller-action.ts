import { startController, startFailoverController, type ControllerSnapshot } from "@sluice/controller";
import { EXIT_FAILURE, EXIT_OK, type Cli } from "../cli.ts";
import { withBrokers } from "../brokers-option.ts";
import { loadPipelineSpec } from "../load-spec.ts";
import { loadSourcesOf, namesLoadModule } from "../load-sources.ts";
import { CONTROLLER_TOKEN_ENV, HTTP_TLS_FLAGS } from "./controller.ts";
import { controllerService } from "../traced-services.ts";
import { startTracing, type Tracing } from "../tracing.ts";
import { httpEndpointWarning, serveControllerStatus } from "../status-endpoints.ts";
import { clearTokenWarning, isLoopbackHost, loadHttpTls, loadServerTls, type ServerTlsFlags } from "../tls-options.ts";

export interface ControllerOptions extends ServerTlsFlags {
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

export async function controllerAction(cli: Cli, specPath: string, options: ControllerOptions): Promise<void> {
  const say = (line: string) => cli.stdout(`sluice controller: ${line}\n`);
  const loaded = await loadPipelineSpec(specPath, { beforeModules: cli.beforeSpecModules });
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
    if (namesLoadModule(spec)) await cli.beforeSpecModules?.();
    const common = {
      spec,
      baseDir: loaded.specDir,
      loadSourceOf: loadSourcesOf(loaded.specDir, cli.beforeSpecModules),
      host: options.host,
      port: options.port,
      ...(token !== undefined ? { token } : {}),
      ...(tls !== undefined ? { tls } : {}),
      log: say,
    };
    if (spec.kafka) {
      // docs/design.md §5.2: one of a failover group; its state lives in <pipeline>.controller-state.
      // Imported here: kafkajs is a good part of a start's CPU, and a controller without `kafka` never uses it.
      const { kafkaFailoverPorts, leaseMsOf } = await import("../failover-ports.ts");
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
}

function nonEmpty(value: string | undefined): string | undefined {
  return value === undefined || value === "" ? undefined : value;
}
