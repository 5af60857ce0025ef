import { writeControllerMetrics } from "../../packages/controller/src/index.ts";
import { PrometheusText, type HistogramSample, type Sample } from "../../packages/status-http/src/index.ts";
import type { ControllerSnapshot } from "../../packages/controller/src/quota/controller-snapshot.ts";
import { writeWorkerMetrics, type WorkerMetricsSource } from "../../packages/cli/src/worker-metrics.ts";
import { code, page, table } from "./markdown.ts";
import { metricProbe } from "./metric-probe.ts";

// docs/reference/metrics.md from the writers that serve /metrics: the controller's
// (writeControllerMetrics) and the worker's (writeWorkerMetrics). Each writer is run once on a probe
// snapshot into a recording exposition, which keeps name, type, help and label names in write order.

export interface MetricFamily {
  readonly name: string;
  readonly type: "counter" | "gauge" | "histogram";
  readonly help: string;
  /** Label names seen on the family's series; null when the writer wrote no series for the probe. */
  readonly labels: readonly string[] | null;
  /** A histogram's bucket upper bounds (`le`), +Inf excluded. */
  readonly bounds?: readonly number[];
}

class RecordingText extends PrometheusText {
  readonly recorded: MetricFamily[] = [];

  override counter(name: string, help: string, samples: readonly Sample[]): this {
    return this.record(name, "counter", help, samples);
  }

  override gauge(name: string, help: string, samples: readonly Sample[]): this {
    return this.record(name, "gauge", help, samples);
  }

  override histogram(name: string, help: string, bounds: readonly number[], samples: readonly HistogramSample[]): this {
    return this.record(name, "histogram", help, samples, bounds);
  }

  private record(
    name: string,
    type: MetricFamily["type"],
    help: string,
    samples: readonly { readonly labels: Readonly<Record<string, unknown>> }[],
    bounds?: readonly number[],
  ): this {
    const labels = samples.length === 0 ? null : [...new Set(samples.flatMap((s) => Object.keys(s.labels)))];
    this.recorded.push({ name, type, help, labels, ...(bounds ? { bounds: [...bounds] } : {}) });
    return this;
  }
}

export function controllerMetricFamilies(): MetricFamily[] {
  const out = new RecordingText();
  writeControllerMetrics(out, metricProbe() as ControllerSnapshot);
  return out.recorded;
}

export function workerMetricFamilies(): MetricFamily[] {
  const out = new RecordingText();
  writeWorkerMetrics(out, "pipeline", metricProbe() as WorkerMetricsSource);
  return out.recorded;
}

function familyTable(families: readonly MetricFamily[]): string {
  return table(
    ["name", "type", "labels", "help"],
    families.map((f) => [
      code(f.name),
      f.bounds ? `histogram (le: ${f.bounds.join(", ")})` : f.type,
      f.labels === null ? "(unknown)" : f.labels.map((l) => code(l)).join(", "),
      f.help,
    ]),
  );
}

export function metricsReferencePage(): string {
  return page("Metrics reference", [
    [
      "Prometheus text exposition (version 0.0.4) on `/metrics`. A histogram is exposed as",
      "`<name>_bucket{le=…}`, `<name>_sum` and `<name>_count`, with the bucket bounds given in its type",
      "column. Every process also exposes prom-client's default process metrics (`process_*`,",
      "`nodejs_*`: CPU, memory, event-loop lag, GC, handles), not listed here.",
      "",
      "Where: the controller's families on `sluice controller --http-port`; the worker's on",
      "`sluice worker --metrics-port`; `sluice run --http-port` serves both (embedded controller and worker).",
    ].join("\n"),
    "## Controller",
    familyTable(controllerMetricFamilies()),
    "## Worker",
    familyTable(workerMetricFamilies()),
  ]);
}
