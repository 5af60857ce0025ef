import { pathToFileURL } from "node:url";
import { join } from "node:path";
import { ROOT } from "./processes.ts";

// Typed access to scripts/prometheus.mjs for the tests (plain ESM, no declarations of its own).

export interface SharedPrometheus {
  readonly url: string;
  stop(): Promise<void>;
}

export interface OwnPrometheus {
  readonly pid: number;
  readonly url: string;
  readonly home: string;
}

export interface ScrapeTarget {
  readonly file: string;
  remove(): void;
}

interface PrometheusScript {
  ensurePrometheus(): Promise<SharedPrometheus>;
  startPrometheus(options: { home: string; port: number; freshData?: boolean }): Promise<OwnPrometheus>;
  stopPrometheus(pid: number): Promise<string>;
  registerScrapeTarget(hostPort: string, labels?: Record<string, string>, options?: { home?: string }): ScrapeTarget;
}

export async function prometheusScript(): Promise<PrometheusScript> {
  return (await import(pathToFileURL(join(ROOT, "scripts/prometheus.mjs")).href)) as PrometheusScript;
}

/** The one number an instant query returns, or undefined while it returns nothing. */
export async function queryNumber(url: string, query: string): Promise<number | undefined> {
  const response = await fetch(`${url}/api/v1/query?query=${encodeURIComponent(query)}`);
  const body = (await response.json()) as { data?: { result?: { value?: [number, string] }[] } };
  const value = body.data?.result?.[0]?.value?.[1];
  return value === undefined ? undefined : Number(value);
}

/** Polls until the query returns a number (a fresh target takes a few seconds to be scraped). */
export async function waitForNumber(url: string, query: string, timeoutMs = 30_000): Promise<number> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const value = await queryNumber(url, query).catch(() => undefined);
    if (value !== undefined) return value;
    if (Date.now() > deadline) throw new Error(`Prometheus at ${url} returned nothing for ${query} within ${timeoutMs} ms`);
    await new Promise((done) => setTimeout(done, 200));
  }
}
