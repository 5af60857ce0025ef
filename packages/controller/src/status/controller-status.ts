import type { ControllerSnapshot } from "../quota/controller.ts";
import { writeControllerMetrics } from "./controller-metrics.ts";
import { PrometheusText, startStatusServer, type RunningStatusServer, type StatusServerOptions } from "@sluice/status-http";
import { dashboardPage } from "./dashboard-page.ts";

export interface ControllerStatusOptions {
  /** A Controller, or a FailoverController (whose snapshot adds the leadership). */
  readonly controller: { snapshot(): ControllerSnapshot };
  /** Default 127.0.0.1. */
  readonly host?: string;
  /** 0 = any free port. */
  readonly port: number;
  /** Dashboard title, e.g. `pipeline "enricher"`. */
  readonly title?: string;
  /** More families on the same /metrics: `sluice run` adds its worker's, so one port shows the whole process. */
  readonly moreMetrics?: (out: PrometheusText) => void;
  /** https, token and open metrics: see StatusServerOptions. */
  readonly tls?: StatusServerOptions["tls"];
  readonly token?: string | undefined;
  readonly openMetrics?: boolean | undefined;
}

/** The controller's dashboard, /api/snapshot and /metrics on one HTTP port (`sluice controller --http-port`). */
export function startControllerStatusServer(options: ControllerStatusOptions): Promise<RunningStatusServer> {
  const { controller } = options;
  return startStatusServer({
    port: options.port,
    ...(options.host !== undefined ? { host: options.host } : {}),
    tls: options.tls,
    token: options.token,
    openMetrics: options.openMetrics,
    dashboard: { page: dashboardPage(options.title ?? "Sluice"), snapshot: () => controller.snapshot() },
    health: () => {
      const failure = controller.snapshot().failover?.stateWriteFailure ?? null;
      return failure === null ? null : `the leader cannot write its state to the controller-state topic: ${failure}`;
    },
    metrics: () => {
      const out = new PrometheusText();
      writeControllerMetrics(out, controller.snapshot());
      options.moreMetrics?.(out);
      return out.render({ processMetrics: true });
    },
  });
}
