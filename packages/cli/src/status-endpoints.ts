import type { Controller, ControllerSnapshot } from "@sluice/controller";
import { PrometheusText, startStatusServer, type RunningStatusServer } from "@sluice/status-http";
export { DEFAULT_HTTP_HOST, METRICS_OPEN_DESCRIPTION, parseHttpPort } from "./command-options.ts";
import { clearTokenWarning, isLoopbackHost } from "./tls-options.ts";
import { writeWorkerMetrics, type WorkerMetricsSource } from "./worker-metrics.ts";

// The HTTP endpoints of each command (dashboard, /api/snapshot, /metrics, /healthz) and the lines
// they print: tests and scripts parse `… on http(s)://127.0.0.1:<port>/…`, so the shapes are fixed here.
// The controller's status server (its dashboard) is imported only where it is served: `sluice
// worker` would otherwise load the whole controller package on every start.

export interface HttpEndpointOptions {
  readonly host: string;
  readonly port: number;
  /** https with this certificate and key. */
  readonly tls?: { readonly cert: Buffer; readonly key: Buffer } | undefined;
  /** Required on every request (bearer header or the dashboard's cookie). */
  readonly token?: string | undefined;
  /** /metrics and /healthz answer without the token. */
  readonly openMetrics?: boolean | undefined;
}

/** The warning for a token served in clear beyond this machine; undefined when there is nothing to warn about. */
export function httpEndpointWarning(endpoint: HttpEndpointOptions, what: string, tlsFlags: string): string | undefined {
  if (endpoint.token === undefined || endpoint.tls !== undefined || isLoopbackHost(endpoint.host)) return undefined;
  return clearTokenWarning(what, endpoint.host, tlsFlags);
}

/** `sluice controller --http-port`: dashboard and the controller's metrics. */
export async function serveControllerStatus(
  controller: { snapshot(): ControllerSnapshot },
  pipeline: string,
  endpoint: HttpEndpointOptions,
  say: (line: string) => void,
): Promise<RunningStatusServer> {
  const { startControllerStatusServer } = await import("@sluice/controller");
  const server = await startControllerStatusServer({ controller, ...endpoint, title: `pipeline "${pipeline}"` });
  say(`dashboard on ${server.url} (metrics: ${server.url}metrics)`);
  return server;
}

/**
 * `sluice run --http-port`: one port for the whole process. With the embedded controller, its
 * dashboard and metrics plus the worker's metrics; with a remote controller (controller.address),
 * the worker's metrics only — the dashboard is the remote controller's.
 */
export async function serveRunStatus(
  controller: Controller | null,
  worker: WorkerMetricsSource,
  pipeline: string,
  endpoint: HttpEndpointOptions,
  say: (line: string) => void,
): Promise<RunningStatusServer> {
  if (controller) {
    const { startControllerStatusServer } = await import("@sluice/controller");
    const server = await startControllerStatusServer({
      controller,
      ...endpoint,
      title: `pipeline "${pipeline}"`,
      moreMetrics: (out) => writeWorkerMetrics(out, pipeline, worker),
    });
    say(`dashboard on ${server.url} (metrics of the embedded controller and the worker: ${server.url}metrics)`);
    return server;
  }
  const server = await serveWorkerOnly(worker, pipeline, endpoint);
  say(`metrics on ${server.url}metrics (the dashboard is on the controller's --http-port)`);
  return server;
}

/** `sluice worker --metrics-port`: the worker's metrics and /healthz. */
export async function serveWorkerMetrics(
  worker: WorkerMetricsSource,
  pipeline: string,
  endpoint: HttpEndpointOptions,
  say: (line: string) => void,
): Promise<RunningStatusServer> {
  const server = await serveWorkerOnly(worker, pipeline, endpoint);
  say(`metrics on ${server.url}metrics`);
  return server;
}

function serveWorkerOnly(worker: WorkerMetricsSource, pipeline: string, endpoint: HttpEndpointOptions): Promise<RunningStatusServer> {
  return startStatusServer({
    ...endpoint,
    metrics: () => {
      const out = new PrometheusText();
      writeWorkerMetrics(out, pipeline, worker);
      return out.render({ processMetrics: true });
    },
  });
}
