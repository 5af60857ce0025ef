/**
 * The Prometheus text exposition format, version 0.0.4 (what every Prometheus server, the
 * OpenTelemetry collector's prometheus receiver and VictoriaMetrics scrape), written by hand.
 *
 * Why not prom-client: its registry is global mutable state fed by `inc()`/`set()` calls, while
 * Sluice already keeps every counter in its own state (QuotaBucket counters, WaitHistogram,
 * ComputationStats) and hands out consistent snapshots. Rendering a snapshot at scrape time is a
 * pure function over data we have; a registry would be a second copy of the same numbers to keep
 * in step. The format is small: HELP and TYPE once per family, then one line per sample.
 *
 * Lives in @sluice/controller because the controller owns /metrics (DESIGN §2); the CLI renders the
 * worker's families with the same writer, so one process can expose both on one port.
 */

export const PROMETHEUS_CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8";

export type Labels = Readonly<Record<string, string>>;

export interface Sample {
  readonly labels: Labels;
  readonly value: number;
}

export interface HistogramSample {
  readonly labels: Labels;
  /** Cumulative counts per upper bound (same length as the family's bounds); +Inf is `count`. */
  readonly buckets: readonly number[];
  readonly count: number;
  readonly sum: number;
}

const METRIC_NAME = /^[a-zA-Z_:][a-zA-Z0-9_:]*$/;
const LABEL_NAME = /^[a-zA-Z_][a-zA-Z0-9_]*$/;

/** Collects metric families in the order they are written and renders them as one exposition. */
export class PrometheusText {
  private readonly lines: string[] = [];
  private readonly families = new Set<string>();

  counter(name: string, help: string, samples: readonly Sample[]): this {
    if (!name.endsWith("_total")) throw new Error(`counter "${name}" must end in _total (Prometheus naming)`);
    this.header(name, "counter", help);
    for (const sample of samples) this.sample(name, sample.labels, sample.value);
    return this;
  }

  gauge(name: string, help: string, samples: readonly Sample[]): this {
    this.header(name, "gauge", help);
    for (const sample of samples) this.sample(name, sample.labels, sample.value);
    return this;
  }

  /** `<name>_bucket{le=…}` per bound and `+Inf`, then `<name>_sum` and `<name>_count`. */
  histogram(name: string, help: string, bounds: readonly number[], samples: readonly HistogramSample[]): this {
    this.header(name, "histogram", help);
    for (const sample of samples) {
      if (sample.buckets.length !== bounds.length) {
        throw new Error(`histogram "${name}" ${formatLabels(sample.labels)}: ${sample.buckets.length} buckets for ${bounds.length} bounds`);
      }
      bounds.forEach((bound, i) => this.sample(`${name}_bucket`, { ...sample.labels, le: formatValue(bound) }, sample.buckets[i] ?? 0));
      this.sample(`${name}_bucket`, { ...sample.labels, le: "+Inf" }, sample.count);
      this.sample(`${name}_sum`, sample.labels, sample.sum);
      this.sample(`${name}_count`, sample.labels, sample.count);
    }
    return this;
  }

  /** The exposition: families in write order, ending with a newline as the format requires. */
  toString(): string {
    return this.lines.length === 0 ? "" : `${this.lines.join("\n")}\n`;
  }

  private header(name: string, type: string, help: string): void {
    if (!METRIC_NAME.test(name)) throw new Error(`"${name}" is not a valid Prometheus metric name`);
    // A family written twice would be rejected by the scraper ("second TYPE line"); fail here instead.
    if (this.families.has(name)) throw new Error(`metric family "${name}" written twice in one exposition`);
    this.families.add(name);
    this.lines.push(`# HELP ${name} ${help.replace(/\\/g, "\\\\").replace(/\n/g, "\\n")}`, `# TYPE ${name} ${type}`);
  }

  private sample(name: string, labels: Labels, value: number): void {
    this.lines.push(`${name}${formatLabels(labels)} ${formatValue(value)}`);
  }
}

function formatLabels(labels: Labels): string {
  const entries = Object.entries(labels);
  if (entries.length === 0) return "";
  const parts = entries.map(([key, value]) => {
    if (!LABEL_NAME.test(key) || key.startsWith("__")) throw new Error(`"${key}" is not a valid Prometheus label name`);
    return `${key}="${value.replace(/\\/g, "\\\\").replace(/"/g, '\\"').replace(/\n/g, "\\n")}"`;
  });
  return `{${parts.join(",")}}`;
}

/** Go's ParseFloat spellings: integers stay integers, infinities are `+Inf`/`-Inf`. */
export function formatValue(value: number): string {
  if (Number.isNaN(value)) return "NaN";
  if (value === Number.POSITIVE_INFINITY) return "+Inf";
  if (value === Number.NEGATIVE_INFINITY) return "-Inf";
  return String(value);
}
