// Which span exporters run, by OpenTelemetry's own settings (docs/design.md §15): OTEL_TRACES_EXPORTER, a
// comma-separated list of `otlp` (the default), `zipkin`, `console` and `none`, with each exporter's
// endpoint variable. Pure: environment in, destinations and warnings out; tracing.ts builds them.

export type TraceExporterKind = "otlp" | "zipkin" | "console";

export interface TraceDestination {
  readonly kind: TraceExporterKind;
  /** Where spans are sent (OTLP/HTTP traces URL, Zipkin v2 spans URL); null for the console. */
  readonly url: string | null;
}

export interface TraceDestinations {
  readonly destinations: readonly TraceDestination[];
  /** Settings that were ignored, for the user (OpenTelemetry never stops a program over them). */
  readonly warnings: readonly string[];
  /** Why there is no tracing, when `destinations` is empty. */
  readonly off: string;
}

/** OpenTelemetry's default Zipkin endpoint (specification, "Zipkin Exporter"). */
export const DEFAULT_ZIPKIN_ENDPOINT = "http://localhost:9411/api/v2/spans";
/** OpenTelemetry's default OTLP/HTTP base, used when `otlp` is named explicitly without an endpoint. */
const DEFAULT_OTLP_BASE = "http://localhost:4318";
const TRACES_PATH = "/v1/traces";
const KINDS: readonly string[] = ["otlp", "zipkin", "console", "none"];

/**
 * The exporters to run.
 * - `--otlp <url>` wins over everything: spans go there by OTLP (beside any other exporter named).
 * - OTEL_SDK_DISABLED=true: no tracing.
 * - OTEL_TRACES_EXPORTER unset or empty: `otlp`, and only when an OTLP endpoint is set (Sluice traces
 *   nothing by default rather than send to a localhost collector that is not there).
 * - `none` anywhere in the list: no tracing (as OpenTelemetry's Node SDK, which warns about the rest).
 * - `otlp` named: OTEL_EXPORTER_OTLP_TRACES_ENDPOINT as it is, else OTEL_EXPORTER_OTLP_ENDPOINT +
 *   `/v1/traces`, else http://localhost:4318/v1/traces.
 * - `zipkin`: OTEL_EXPORTER_ZIPKIN_ENDPOINT, else http://localhost:9411/api/v2/spans.
 * - `console`: spans printed on stdout.
 * - Unknown names are ignored with a warning.
 */
export function traceDestinations(otlpFlag: string | undefined, env: NodeJS.ProcessEnv = process.env): TraceDestinations {
  const warnings: string[] = [];
  const flag = otlpFlag !== undefined && otlpFlag !== "" ? { kind: "otlp" as const, url: withTracesPath(otlpFlag) } : null;
  if (env["OTEL_SDK_DISABLED"]?.trim().toLowerCase() === "true" && !flag) {
    return { destinations: [], warnings, off: "no tracing (OTEL_SDK_DISABLED=true)" };
  }
  const raw = env["OTEL_TRACES_EXPORTER"]?.trim() ?? "";
  const named =
    raw === ""
      ? []
      : [
          ...new Set(
            raw
              .split(",")
              .map((n) => n.trim().toLowerCase())
              .filter((n) => n !== ""),
          ),
        ];
  for (const name of named) {
    if (!KINDS.includes(name)) warnings.push(`OTEL_TRACES_EXPORTER names "${name}", which Sluice does not export to (otlp, zipkin, console, none); ignored`);
  }
  if (named.includes("none")) {
    const others = named.filter((n) => n !== "none" && KINDS.includes(n));
    if (others.length > 0) warnings.push(`OTEL_TRACES_EXPORTER="${raw}" contains "none": ${others.join(", ")} not started`);
    return { destinations: flag ? [flag] : [], warnings, off: "no tracing (OTEL_TRACES_EXPORTER=none)" };
  }
  const destinations: TraceDestination[] = flag ? [flag] : [];
  const implicit = named.length === 0;
  for (const name of implicit ? ["otlp"] : named) {
    if (name === "otlp" && !flag) {
      const url = otlpFromEnv(env) ?? (implicit ? null : withTracesPath(DEFAULT_OTLP_BASE));
      if (url !== null) destinations.push({ kind: "otlp", url });
    } else if (name === "zipkin") {
      destinations.push({ kind: "zipkin", url: env["OTEL_EXPORTER_ZIPKIN_ENDPOINT"]?.trim() || DEFAULT_ZIPKIN_ENDPOINT });
    } else if (name === "console") {
      destinations.push({ kind: "console", url: null });
    }
  }
  return { destinations, warnings, off: "no tracing (set OTEL_EXPORTER_OTLP_ENDPOINT, --otlp, or OTEL_TRACES_EXPORTER=zipkin|console)" };
}

/** For the startup line: the OTLP URL as it is, `http://…/api/v2/spans (Zipkin)`, `stdout (console)`. */
export function describeDestination(d: TraceDestination): string {
  switch (d.kind) {
    case "otlp":
      return d.url ?? "";
    case "zipkin":
      return `${d.url} (Zipkin)`;
    case "console":
      return "stdout (console)";
  }
}

function otlpFromEnv(env: NodeJS.ProcessEnv): string | null {
  const specific = env["OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"]?.trim();
  if (specific) return specific;
  const base = env["OTEL_EXPORTER_OTLP_ENDPOINT"]?.trim();
  return base ? withTracesPath(base) : null;
}

export function withTracesPath(base: string): string {
  const trimmed = base.trim().replace(/\/+$/, "");
  return trimmed.endsWith(TRACES_PATH) ? trimmed : `${trimmed}${TRACES_PATH}`;
}
