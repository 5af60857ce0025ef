import { readFileSync } from "node:fs";
import { hostname } from "node:os";
import type { Attributes, DiagLogLevel, Tracer } from "@opentelemetry/api";
import type { SpanExporter } from "@opentelemetry/sdk-trace-node";
import { InvalidArgumentError } from "commander";
import { otelDiagLogger } from "./otel-diag-logger.ts";

/** One OpenTelemetry service as Jaeger lists it: a tracer provider with its own resource. */
export interface TracedService {
  /** `service.name`: `sluice-worker` or `sluice-controller`. */
  readonly name: string;
  /** `service.instance.id`: the worker id, or `<host>-<pid>` of a controller. */
  readonly instanceId: string;
  /** More resource attributes (pipeline, computations, worker id, …). */
  readonly attributes: Attributes;
}

export interface TracingOptions {
  /** `--otlp <url>`: OTLP/HTTP base URL, read like OTEL_EXPORTER_OTLP_ENDPOINT; wins over the environment. */
  readonly otlp?: string;
  /**
   * The process's own service. Its provider is registered globally, with the W3C trace-context
   * propagator and an AsyncLocalStorage context manager, so the libraries' `trace.getTracer()`
   * (runtime: the iteration and Input.Throttle spans) report here.
   */
  readonly service: TracedService;
  /**
   * A second service living in the same process: `sluice run`'s embedded controller. It gets a
   * provider of its own (not registered) so that its spans carry its own service name, exactly as
   * if it ran as `sluice controller` — a Jaeger user then finds the controller's RequestQuota spans
   * under `sluice-controller` in both deployments.
   */
  readonly embedded?: TracedService;
  /**
   * Where the endpoint variables are read (default process.env). The SDK reads the other OTEL_*
   * variables itself from process.env: OTEL_RESOURCE_ATTRIBUTES, OTEL_EXPORTER_OTLP_HEADERS,
   * OTEL_BSP_*, OTEL_TRACES_SAMPLER.
   */
  readonly env?: NodeJS.ProcessEnv;
  /** Where OpenTelemetry's own warnings go (an unreachable collector). Default: process.stderr. */
  readonly stderr?: (line: string) => void;
  /** Tests: export here instead of OTLP/HTTP (tracing is then on without an endpoint). */
  readonly exporter?: () => SpanExporter;
}

export interface Tracing {
  readonly enabled: boolean;
  /** The OTLP/HTTP traces URL spans are sent to; null when tracing is off or a test exporter is used. */
  readonly url: string | null;
  /** For the startup line, e.g. `tracing to http://127.0.0.1:4318/v1/traces as sluice-worker and sluice-controller`. */
  readonly description: string;
  /** Tracer of the embedded service; undefined when tracing is off or there is none. */
  readonly embeddedTracer: Tracer | undefined;
  /** Exports what is buffered and stops the providers: at most SHUTDOWN_TIMEOUT_MS. Idempotent. */
  shutdown(): Promise<void>;
}

export const OTLP_OPTION_DESCRIPTION =
  "export traces by OTLP/HTTP to this base URL, e.g. http://127.0.0.1:4318 (default: $OTEL_EXPORTER_OTLP_ENDPOINT; no tracing when neither is set)";

/** How long shutdown waits for the last export: an unreachable collector must not hold the exit. */
export const SHUTDOWN_TIMEOUT_MS = 5_000;

const TRACES_PATH = "/v1/traces";

const DISABLED: Tracing = {
  enabled: false,
  url: null,
  description: "no tracing (set OTEL_EXPORTER_OTLP_ENDPOINT or --otlp)",
  embeddedTracer: undefined,
  shutdown: async () => {},
};

/** commander parser of `--otlp <url>`: an http(s) URL. */
export function parseOtlpUrl(value: string): string {
  if (!isHttpUrl(value)) throw new InvalidArgumentError(`an OTLP/HTTP endpoint is an http(s) URL such as http://127.0.0.1:4318, got "${value}"`);
  return value;
}

/**
 * Where traces go, by the OpenTelemetry rules: `--otlp` and OTEL_EXPORTER_OTLP_ENDPOINT are base
 * URLs that get `/v1/traces` appended; OTEL_EXPORTER_OTLP_TRACES_ENDPOINT is used as it is.
 * OTEL_SDK_DISABLED=true turns tracing off. Null: no tracing.
 */
export function otlpTracesUrl(otlp: string | undefined, env: NodeJS.ProcessEnv = process.env): string | null {
  if (otlp !== undefined && otlp !== "") return withTracesPath(otlp);
  if (env["OTEL_SDK_DISABLED"]?.trim().toLowerCase() === "true") return null;
  const specific = env["OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"]?.trim();
  if (specific) return specific;
  const base = env["OTEL_EXPORTER_OTLP_ENDPOINT"]?.trim();
  return base ? withTracesPath(base) : null;
}

/**
 * Starts the OpenTelemetry SDK when an endpoint is configured. Without one nothing is loaded: the
 * SDK modules are imported only here, and the libraries' tracers stay the API's no-ops.
 */
export async function startTracing(options: TracingOptions): Promise<Tracing> {
  const env = options.env ?? process.env;
  const url = options.exporter ? null : otlpTracesUrl(options.otlp, env);
  if (!options.exporter && url === null) return DISABLED;
  if (url !== null && !isHttpUrl(url)) {
    // As everywhere in OpenTelemetry, a telemetry setting never stops the program: say so, run untraced.
    (options.stderr ?? ((line) => process.stderr.write(line)))(
      `sluice: no tracing: the OTLP traces endpoint "${url}" is not an http(s) URL; set OTEL_EXPORTER_OTLP_ENDPOINT to e.g. http://127.0.0.1:4318\n`,
    );
    return DISABLED;
  }

  const [api, core, resources, semconv, sdk, otlp] = await Promise.all([
    import("@opentelemetry/api"),
    import("@opentelemetry/core"),
    import("@opentelemetry/resources"),
    import("@opentelemetry/semantic-conventions"),
    import("@opentelemetry/sdk-trace-node"),
    url !== null ? import("@opentelemetry/exporter-trace-otlp-http") : Promise.resolve(null),
  ]);
  // The exporter reports failed exports (an unreachable collector) through diag; without a logger
  // they would vanish and an empty Jaeger would be a mystery.
  api.diag.setLogger(otelDiagLogger(options.stderr ?? ((line) => process.stderr.write(line)), `traces to ${url ?? "a test exporter"}`), {
    logLevel: diagLevel(env["OTEL_LOG_LEVEL"], api.DiagLogLevel),
    suppressOverrideMessage: true,
  });

  const version = cliVersion();
  // Lowest precedence first: SDK defaults (telemetry.sdk.*), then OTEL_RESOURCE_ATTRIBUTES, then ours.
  const base = resources.defaultResource().merge(resources.detectResources({ detectors: [resources.envDetector] }));
  const providerFor = (service: TracedService) => {
    const resource = base.merge(
      resources.resourceFromAttributes({
        ...service.attributes,
        [semconv.ATTR_SERVICE_NAME]: service.name,
        [semconv.ATTR_SERVICE_INSTANCE_ID]: service.instanceId,
        [semconv.ATTR_SERVICE_VERSION]: version,
        // Incubating conventions, copied as upstream advises (they may still be renamed there).
        "host.name": hostname(),
        "process.pid": process.pid,
        "process.runtime.name": "nodejs",
        "process.runtime.version": process.versions.node,
      }),
    );
    const exporter = options.exporter?.() ?? (otlp && url !== null ? new otlp.OTLPTraceExporter({ url }) : null);
    if (!exporter) throw new Error("no span exporter"); // unreachable: url or exporter is set above
    return new sdk.NodeTracerProvider({ resource, spanProcessors: [new sdk.BatchSpanProcessor(exporter)] });
  };

  const main = providerFor(options.service);
  main.register({ propagator: new core.W3CTraceContextPropagator() });
  const embedded = options.embedded ? providerFor(options.embedded) : null;

  let stopping: Promise<void> | undefined;
  return {
    enabled: true,
    url,
    description: `tracing to ${url ?? "a test exporter"} as ${[options.service, ...(options.embedded ? [options.embedded] : [])].map((s) => s.name).join(" and ")}`,
    embeddedTracer: embedded?.getTracer("@sluice/controller"),
    shutdown() {
      stopping ??= (async () => {
        const done = Promise.allSettled([main.shutdown(), embedded?.shutdown()]);
        let timer: NodeJS.Timeout | undefined;
        const timeout = new Promise<void>((resolve) => {
          timer = setTimeout(resolve, SHUTDOWN_TIMEOUT_MS);
          timer.unref();
        });
        await Promise.race([done, timeout]);
        clearTimeout(timer);
        api.trace.disable();
        api.propagation.disable();
        api.context.disable();
        api.diag.disable();
      })();
      return stopping;
    },
  };
}

/** Resource `service.version`: the CLI package's version. */
function cliVersion(): string {
  const manifest: unknown = JSON.parse(readFileSync(new URL("../package.json", import.meta.url), "utf8"));
  const version = typeof manifest === "object" && manifest !== null ? (manifest as { version?: unknown }).version : undefined;
  return typeof version === "string" ? version : "unknown";
}

function withTracesPath(base: string): string {
  const trimmed = base.trim().replace(/\/+$/, "");
  return trimmed.endsWith(TRACES_PATH) ? trimmed : `${trimmed}${TRACES_PATH}`;
}

function isHttpUrl(value: string): boolean {
  try {
    const url = new URL(value);
    return url.protocol === "http:" || url.protocol === "https:";
  } catch {
    return false;
  }
}

/** OTEL_LOG_LEVEL (none, error, warn, info, debug, verbose, all); default warn. */
function diagLevel(value: string | undefined, levels: typeof DiagLogLevel): DiagLogLevel {
  switch (value?.trim().toLowerCase()) {
    case "none":
      return levels.NONE;
    case "error":
      return levels.ERROR;
    case "info":
      return levels.INFO;
    case "debug":
      return levels.DEBUG;
    case "verbose":
      return levels.VERBOSE;
    case "all":
      return levels.ALL;
    default:
      return levels.WARN;
  }
}
