import { InvalidArgumentError } from "commander";

// What the commands' registrations need up front (flag spellings, descriptions, argument parsers).
// Commander needs them before it parses; each command's action, with the controller, Kafka, gRPC and
// OpenTelemetry behind it, is imported only when it runs. So this file imports commander and nothing
// heavier: `sluice --help` and every usage error load no more than this.

/** Host of every command's HTTP status server unless --http-host/--metrics-host says otherwise. */
export const DEFAULT_HTTP_HOST = "127.0.0.1";

/** `--http-port` / `--metrics-port` values: 0 picks a free port (the printed line tells which). */
export function parseHttpPort(value: string): number {
  const port = Number(value);
  if (!/^\d+$/.test(value) || port > 65_535) throw new InvalidArgumentError(`a TCP port is an integer from 0 to 65535, got "${value}"`);
  return port;
}

/** `--metrics-open`: the same words on every command that has an HTTP server. */
export const METRICS_OPEN_DESCRIPTION = "with a token: leave /metrics and /healthz open (for scrapers and health checks that send no header)";

export const OTLP_OPTION_DESCRIPTION =
  "export traces by OTLP/HTTP to this base URL, e.g. http://127.0.0.1:4318 (default: $OTEL_EXPORTER_OTLP_ENDPOINT; " +
  "OTEL_TRACES_EXPORTER=zipkin|console|none as in OpenTelemetry; no tracing when nothing is set)";

/** commander parser of `--otlp <url>`: an http(s) URL. */
export function parseOtlpUrl(value: string): string {
  if (!isHttpUrl(value)) throw new InvalidArgumentError(`an OTLP/HTTP endpoint is an http(s) URL such as http://127.0.0.1:4318, got "${value}"`);
  return value;
}

export function isHttpUrl(value: string): boolean {
  try {
    const url = new URL(value);
    return url.protocol === "http:" || url.protocol === "https:";
  } catch {
    return false;
  }
}

/** `.option(...SERVER_TLS_OPTIONS.cert(what))`: the server flags, as commander's (flags, description) pairs. */
export const SERVER_TLS_OPTIONS = {
  cert: (what: string) => ["--tls-cert <file>", `serve ${what} over TLS with this PEM certificate (chain); needs --tls-key`] as const,
  key: ["--tls-key <file>", "PEM private key of --tls-cert"] as const,
  clientCa: ["--tls-client-ca <file>", "mutual TLS: accept only clients presenting a certificate signed by this PEM CA"] as const,
};

/** `.option(...CLIENT_TLS_OPTIONS.ca)`: the client flags, as commander's (flags, description) pairs. */
export const CLIENT_TLS_OPTIONS = {
  ca: ["--tls-ca <file>", "connect to the controller with TLS, trusting this PEM CA (overrides controller.tls.ca)"] as const,
  cert: ["--tls-cert <file>", "PEM client certificate for a controller that requires one (mutual TLS); needs --tls-key"] as const,
  key: ["--tls-key <file>", "PEM private key of --tls-cert"] as const,
  serverName: ["--tls-server-name <name>", "name the controller's certificate must carry, if not the host of the address"] as const,
};

/** `--controller a:1,b:2` (or one address): the controllers of a failover group, in order. */
export function parseControllerList(value: string): string[] {
  return value
    .split(",")
    .map((part) => part.trim())
    .filter((part) => part !== "");
}
