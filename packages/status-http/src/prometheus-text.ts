import { collectDefaultMetrics, Counter, Gauge, Histogram, Registry, validateMetricName, type MetricType } from "prom-client";

/**
 * The Prometheus text exposition (version 0.0.4) of /metrics, through prom-client: its registry,
 * name and label validation, escaping and number formatting, and `collectDefaultMetrics` for the
 * process figures (CPU, memory, event loop lag, GC, handles) every Node service exposes.
 *
 * Sluice's own figures are not fed to prom-client with `inc()`/`set()`: Sluice already keeps every
 * counter in its own state (QuotaBucket counters, WaitHistogram, ComputationStats) and hands out
 * consistent snapshots, so each scrape builds a fresh registry from one snapshot — families whose
 * `get()` returns the snapshot's series, pre-aggregated histograms included, which prom-client's
 * observe()-only Histogram could not otherwise take. Nothing is kept twice, and a family with no
 * series yet is written as its HELP and TYPE only (prom-client would invent an unlabelled 0).
 *
 * Lives in @sluice/controller because the controller owns /metrics (docs/design.md §2); the CLI writes the
 * worker's families with the same writer, so one process can expose both on one port.
 */

export const PROMETHEUS_CONTENT_TYPE: string = Registry.PROMETHEUS_CONTENT_TYPE;

export type Labels = Readonly<Record<string, string>>;

/** prom-client checks label names too, but only when registering, and without naming the label. */
const LABEL_NAME = /^[a-zA-Z_][a-zA-Z0-9_]*$/;

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

interface Series {
  readonly value: number;
  readonly labels: Labels;
  readonly metricName?: string;
}

interface Family {
  readonly name: string;
  readonly help: string;
  readonly type: "counter" | "gauge" | "histogram";
  readonly series: readonly Series[];
  readonly bounds?: readonly number[];
}

/** Collects metric families in the order they are written and renders them as one exposition. */
export class PrometheusText {
  private readonly families: Family[] = [];
  private readonly names = new Set<string>();

  counter(name: string, help: string, samples: readonly Sample[]): this {
    if (!name.endsWith("_total")) throw new Error(`counter "${name}" must end in _total (Prometheus naming)`);
    return this.add({ name, help, type: "counter", series: samples.map(({ labels, value }) => ({ labels, value })) });
  }

  gauge(name: string, help: string, samples: readonly Sample[]): this {
    return this.add({ name, help, type: "gauge", series: samples.map(({ labels, value }) => ({ labels, value })) });
  }

  /** `<name>_bucket{le=…}` per bound and `+Inf`, then `<name>_sum` and `<name>_count`. */
  histogram(name: string, help: string, bounds: readonly number[], samples: readonly HistogramSample[]): this {
    const series: Series[] = [];
    for (const sample of samples) {
      if (sample.buckets.length !== bounds.length) {
        throw new Error(`histogram "${name}" ${JSON.stringify(sample.labels)}: ${sample.buckets.length} buckets for ${bounds.length} bounds`);
      }
      bounds.forEach((bound, i) =>
        series.push({ metricName: `${name}_bucket`, labels: { ...sample.labels, le: String(bound) }, value: sample.buckets[i] ?? 0 }),
      );
      series.push({ metricName: `${name}_bucket`, labels: { ...sample.labels, le: "+Inf" }, value: sample.count });
      series.push({ metricName: `${name}_sum`, labels: sample.labels, value: sample.sum });
      series.push({ metricName: `${name}_count`, labels: sample.labels, value: sample.count });
    }
    return this.add({ name, help, type: "histogram", series, bounds });
  }

  /**
   * The exposition: families in write order, ending with a newline as the format requires. With
   * `processMetrics`, this process's default metrics (`process_*`, `nodejs_*`) come first.
   */
  async render(options: { readonly processMetrics?: boolean } = {}): Promise<string> {
    if (this.families.length === 0 && !options.processMetrics) return "";
    const registry = new Registry();
    for (const family of this.families) register(family, registry);
    const merged = options.processMetrics ? Registry.merge([processRegistry(), registry]) : registry;
    return merged.metrics();
  }

  private add(family: Family): this {
    if (!validateMetricName(family.name)) throw new Error(`"${family.name}" is not a valid Prometheus metric name ([a-zA-Z_:][a-zA-Z0-9_:]*)`);
    for (const label of labelNamesOf(family)) {
      if (!LABEL_NAME.test(label)) throw new Error(`"${label}" is not a valid Prometheus label name ([a-zA-Z_][a-zA-Z0-9_]*) in family "${family.name}"`);
    }
    // A family written twice would be rejected by the scraper ("second TYPE line"); fail here instead.
    if (this.names.has(family.name)) throw new Error(`metric family "${family.name}" written twice in one exposition`);
    this.names.add(family.name);
    this.families.push(family);
    return this;
  }
}

/** Label names of a family: every key its series carry (prom-client validates them). */
function labelNamesOf(family: Family): string[] {
  const names = new Set<string>();
  for (const { labels } of family.series) for (const key of Object.keys(labels)) if (key !== "le" || family.type !== "histogram") names.add(key);
  for (const name of names) if (name.startsWith("__")) throw new Error(`"${name}" is not a valid Prometheus label name (the __ prefix is reserved)`);
  return [...names];
}

/**
 * One snapshot family as a prom-client metric of its type. The constructor validates the name and
 * label names; `get()` hands the registry the snapshot's series as they are.
 */
function register(family: Family, registry: Registry): void {
  const config = { name: family.name, help: family.help, labelNames: labelNamesOf(family), registers: [registry] };
  const result = {
    name: family.name,
    help: family.help,
    // prom-client's typings declare MetricType a numeric enum, while its registry writes the string
    // it is given after "# TYPE" (its own metrics return "counter", "gauge", …): the string is right.
    type: family.type as unknown as MetricType,
    aggregator: "sum" as const,
    collect: () => undefined,
    values: family.series.map((s) => ({ ...s, labels: { ...s.labels } })),
  };
  try {
    if (family.type === "counter") {
      new (class extends Counter {
        override async get() {
          return result;
        }
      })(config);
    } else if (family.type === "gauge") {
      new (class extends Gauge {
        override async get() {
          return result;
        }
      })(config);
    } else {
      new (class extends Histogram {
        override async get() {
          return result;
        }
        // The registry renders a Histogram through this one rather than get().
        async getForPromString() {
          return result;
        }
      })({ ...config, buckets: [...(family.bounds ?? [])] });
    }
  } catch (error) {
    // prom-client says "Invalid metric name" / "Invalid label name" without saying which.
    const labels = config.labelNames.length > 0 ? ` (labels ${config.labelNames.map((l) => `"${l}"`).join(", ")})` : "";
    throw new Error(
      `metric family "${family.name}"${labels}: ${error instanceof Error ? error.message : String(error)}; names must match [a-zA-Z_:][a-zA-Z0-9_:]*, labels [a-zA-Z_][a-zA-Z0-9_]*`,
      { cause: error },
    );
  }
}

let defaults: Registry | null = null;

/** One registry per process for the default metrics: their collectors keep state between scrapes. */
function processRegistry(): Registry {
  if (defaults === null) {
    defaults = new Registry();
    collectDefaultMetrics({ register: defaults });
  }
  return defaults;
}

/** Go's ParseFloat spellings, as prom-client writes them: integers stay integers, infinities are `+Inf`/`-Inf`. */
export function formatValue(value: number): string {
  if (Number.isNaN(value)) return "NaN";
  if (value === Number.POSITIVE_INFINITY) return "+Inf";
  if (value === Number.NEGATIVE_INFINITY) return "-Inf";
  return String(value);
}
