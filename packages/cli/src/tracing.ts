import { readFileSync } from "node:fs";
import { hostname } from "node:os";
import type { Attributes, DiagLogLevel, Tracer } from "@opentelemetry/api";
import type { SpanExporter } from "@opentelemetry/sdk-trace-node";
import { isHttpUrl } from "./command-options.ts";
import { otelDiagLogger } from "./otel-diag-logger.ts";
export { OTLP_OPTION_DESCRIPTION, parseOtlpUrl } from "./command-options.ts";
import { describeDestination, traceDestinations, withTracesPath, type TraceDestination } from "./trace-exporters.ts";

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
  /** The OTLP/HTTP traces URL spans are sent to; null when there is no OTLP exporter (off, Zipkin or console only, a test exporter). */
  readonly url: string | null;
  /** Every exporter that runs (OTEL_TRACES_EXPORTER, --otlp); empty when off or with a test exporter. */
  readonly destinations: readonly TraceDestination[];
  /** For the startup line, e.g. `tracing to http://127.0.0.1:4318/v1/traces as sluice-worker and sluice-controller`. */
  readonly description: string;
  /** Tracer of the embedded service; undefined when tracing is off or there is none. */
  readonly embeddedTracer: Tracer | undefined;
  /** Exports what is buffered and stops the providers: at most SHUTDOWN_TIMEOUT_MS. Idempotent. */
  shutdown(): Promise<void>;
}

/** How long shutdown waits for the last export: an unreachable collector must not hold the exit. */
export const SHUTDOWN_TIMEOUT_MS = 5_000;

const DISABLED: Tracing = {
  enabled: false,
  url: null,
  destinations: [],
  description: "no tracing (set OTEL_EXPORTER_OTLP_ENDPOINT or --otlp)",
  embeddedTracer: undefined,
  shutdown: async () => {},
};

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
  const stderr = options.stderr ?? ((line) => process.stderr.write(line));
  const chosen = options.exporter ? { destinations: [], warnings: [], off: "" } : traceDestinations(options.otlp, env);
  for (const warning of chosen.warnings) stderr(`sluice: ${warning}\n`);
  const destinations = chosen.destinations.filter((d) => {
    if (d.url === null || isHttpUrl(d.url)) return true;
    // As everywhere in OpenTelemetry, a telemetry setting never stops the program: say so, go on without it.
    const variable =
      d.kind === "zipkin"
        ? "OTEL_EXPORTER_ZIPKIN_ENDPOINT to e.g. http://127.0.0.1:9411/api/v2/spans"
        : "OTEL_EXPORTER_OTLP_ENDPOINT to e.g. http://127.0.0.1:4318";
    stderr(`sluice: no tracing: the ${d.kind === "zipkin" ? "Zipkin" : "OTLP traces"} endpoint "${d.url}" is not an http(s) URL; set ${variable}\n`);
    return false;
  });
  if (!options.exporter && destinations.length === 0) return { ...DISABLED, description: chosen.off || DISABLED.description };
  const url = destinations.find((d) => d.kind === "otlp")?.url ?? null;
  const where = options.exporter ? "a test exporter" : destinations.map(describeDestination).join(" and ");

  const [api, core, resources, semconv, sdk, otlp, zipkin] = await Promise.all([
    import("@opentelemetry/api"),
    import("@opentelemetry/core"),
    import("@opentelemetry/resources"),
    import("@opentelemetry/semantic-conventions"),
    import("@opentelemetry/sdk-trace-node"),
    url !== null ? import("@opentelemetry/exporter-trace-otlp-http") : Promise.resolve(null),
    destinations.some((d) => d.kind === "zipkin") ? import("@opentelemetry/exporter-zipkin") : Promise.resolve(null),
  ]);
  // The exporter reports failed exports (an unreachable collector) through diag; without a logger
  // they would vanish and an empty Jaeger would be a mystery.
  api.diag.setLogger(otelDiagLogger(stderr, `traces to ${where}`), {
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
    const exporters: SpanExporter[] = options.exporter
      ? [options.exporter()]
      : destinations.map((d): SpanExporter => {
          if (d.kind === "otlp" && otlp && d.url !== null) return new otlp.OTLPTraceExporter({ url: d.url });
          if (d.kind === "zipkin" && zipkin && d.url !== null) return new zipkin.ZipkinExporter({ url: d.url });
          return new sdk.ConsoleSpanExporter();
        });
    // The console prints each span as it ends (as OpenTelemetry's SDK sets it up); the others batch.
    const spanProcessors = exporters.map((e) => (e instanceof sdk.ConsoleSpanExporter ? new sdk.SimpleSpanProcessor(e) : new sdk.BatchSpanProcessor(e)));
    return new sdk.NodeTracerProvider({ resource, spanProcessors });
  };

  const main = providerFor(options.service);
  main.register({ propagator: new core.W3CTraceContextPropagator() });
  const embedded = options.embedded ? providerFor(options.embedded) : null;

  let stopping: Promise<void> | undefined;
  return {
    enabled: true,
    url,
    destinations,
    description: `tracing to ${where} as ${[options.service, ...(options.embedded ? [options.embedded] : [])].map((s) => s.name).join(" and ")}`,
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
