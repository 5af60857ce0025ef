import { createServer, type IncomingMessage, type RequestListener, type ServerResponse } from "node:http";
import { createServer as createHttpsServer } from "node:https";
import type { AddressInfo } from "node:net";
import { PROMETHEUS_CONTENT_TYPE } from "./prometheus-text.ts";
import { checkAccess } from "./http-access.ts";

export interface StatusServerOptions {
  /** Default 127.0.0.1: the page and the metrics show limits and client ids, so not on every interface unless asked. */
  readonly host?: string;
  /** 0 = any free port. */
  readonly port: number;
  /** The body of GET /metrics, rendered per scrape. */
  readonly metrics: () => string | Promise<string>;
  /**
   * A page at GET / and the JSON it polls at GET /api/snapshot (the controller's dashboard). Without
   * it the server has /metrics and /healthz only (a worker).
   */
  readonly dashboard?: StatusDashboard;
  /** Serve https with this PEM certificate and key; absent = plain http. */
  readonly tls?: { readonly cert: Buffer; readonly key: Buffer } | undefined;
  /** Every request must carry it (bearer header, or the dashboard's cookie; see http-access.ts). */
  readonly token?: string | undefined;
  /** Why this process does not serve as it should (GET /healthz answers 503 with it); null while it does. */
  readonly health?: () => string | null;
  /** With a token: /metrics and /healthz stay open (scrapers and health checks without a header). */
  readonly openMetrics?: boolean | undefined;
}

export interface StatusDashboard {
  /** The HTML served at GET / (and /index.html). */
  readonly page: string;
  /** The body of GET /api/snapshot, serialised with JSON.stringify per request. */
  readonly snapshot: () => unknown;
}

export interface RunningStatusServer {
  /** The address actually bound. */
  readonly host: string;
  readonly port: number;
  /** Where a person on this machine opens it: `http(s)://127.0.0.1:<port>/` when bound to every interface. */
  readonly url: string;
  /** Stops listening and drops open keep-alive connections (a browser tab holds one). Idempotent. */
  close(): Promise<void>;
}

/**
 * The observability endpoints of a Sluice process over HTTP or https (node:http, no framework):
 *
 *   GET /              the live dashboard page (controller only)
 *   GET /api/snapshot  the ControllerSnapshot JSON the page polls every second (controller only)
 *   GET /metrics       Prometheus text exposition
 *   GET /healthz       200 "ok" while the process serves (for Docker and orchestrator health checks),
 *                      503 with the reason while it does not (a failover leader whose state writes fail)
 */
export async function startStatusServer(options: StatusServerOptions): Promise<RunningStatusServer> {
  const host = options.host ?? "127.0.0.1";
  const page = options.dashboard?.page ?? null;
  const listener: RequestListener = (request, response) => {
    void route(request, response, options, page);
  };
  // Node checks the certificate and key here, before anything listens.
  const server = options.tls ? createHttpsServer({ cert: options.tls.cert, key: options.tls.key }, listener) : createServer(listener);
  await new Promise<void>((resolve, reject) => {
    const onError = (error: NodeJS.ErrnoException) => {
      reject(new Error(`cannot serve HTTP on ${host}:${options.port}: ${error.code === "EADDRINUSE" ? "the port is in use" : error.message}`));
    };
    server.once("error", onError);
    server.listen(options.port, host, () => {
      server.off("error", onError);
      resolve();
    });
  });
  const bound = server.address() as AddressInfo;
  const wildcard = bound.address === "0.0.0.0" || bound.address === "::";
  const urlHost = wildcard ? "127.0.0.1" : bound.family === "IPv6" ? `[${bound.address}]` : bound.address;
  let closing: Promise<void> | undefined;
  return {
    host: bound.address,
    port: bound.port,
    url: `${options.tls ? "https" : "http"}://${urlHost}:${bound.port}/`,
    close() {
      closing ??= new Promise<void>((resolve) => {
        server.close(() => resolve());
        server.closeAllConnections();
      });
      return closing;
    },
  };
}

async function route(request: IncomingMessage, response: ServerResponse, options: StatusServerOptions, page: string | null): Promise<void> {
  const url = new URL(request.url ?? "/", "http://localhost");
  const path = url.pathname;
  if (request.method !== "GET" && request.method !== "HEAD") {
    return send(response, request, 405, "text/plain; charset=utf-8", `${request.method} is not served here; use GET\n`, { allow: "GET, HEAD" });
  }
  if (checkAccess(request, response, url, { token: options.token, openMetrics: options.openMetrics, secure: options.tls !== undefined }) === "answered") return;
  try {
    switch (path) {
      case "/metrics":
        return send(response, request, 200, PROMETHEUS_CONTENT_TYPE, await options.metrics());
      case "/healthz": {
        const problem = options.health?.() ?? null;
        if (problem !== null) return send(response, request, 503, "text/plain; charset=utf-8", `unhealthy: ${problem}\n`);
        return send(response, request, 200, "text/plain; charset=utf-8", "ok\n");
      }
      case "/":
      case "/index.html":
        if (page === null) break;
        return send(response, request, 200, "text/html; charset=utf-8", page);
      case "/api/snapshot":
        if (!options.dashboard) break;
        return send(response, request, 200, "application/json; charset=utf-8", JSON.stringify(await options.dashboard.snapshot()));
      default:
        break;
    }
    const served =
      page === null
        ? "/metrics and /healthz (this process has no controller: its dashboard is on the controller's --http-port)"
        : "/, /api/snapshot, /metrics and /healthz";
    return send(response, request, 404, "text/plain; charset=utf-8", `nothing at ${path}; this server has ${served}\n`);
  } catch (error) {
    const reason = error instanceof Error ? error.message : String(error);
    return send(response, request, 500, "text/plain; charset=utf-8", `${path} failed: ${reason}\n`);
  }
}

function send(
  response: ServerResponse,
  request: IncomingMessage,
  status: number,
  contentType: string,
  body: string,
  headers: Record<string, string> = {},
): void {
  response.writeHead(status, {
    "content-type": contentType,
    "content-length": Buffer.byteLength(body),
    // Every answer is the state of this instant: a cached snapshot or scrape would be a lie.
    "cache-control": "no-store",
    ...headers,
  });
  response.end(request.method === "HEAD" ? undefined : body);
}
