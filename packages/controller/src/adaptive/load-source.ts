import { isAbsolute, resolve } from "node:path";
import { pathToFileURL } from "node:url";
import type { AdaptiveSpec } from "@sluice/spec";
import type { LoadReading } from "./adaptive-law.ts";

/**
 * Where an adaptive throttler reads its load. `read` never throws: every failure is a reading with a
 * reason, because the loop's answer to any failure is the same (hold, count, log, fall back).
 */
export interface LoadSource {
  /** One line for logs: where the load comes from. */
  readonly description: string;
  read(signal: AbortSignal): Promise<LoadReading>;
}

export type LoadSpec = AdaptiveSpec["load"];

export interface LoadSourceOptions {
  /** Directory `load.module` is resolved against (the spec file's). Default: the working directory. */
  readonly baseDir?: string | undefined;
}

function reasonOf(error: unknown): string {
  if (error instanceof Error) {
    const cause = error.cause instanceof Error ? `: ${error.cause.message}` : "";
    return `${error.message}${cause}`;
  }
  return String(error);
}

/** A number the loop can act on: finite and not negative. */
export function checkLoad(value: unknown, from: string): LoadReading {
  if (typeof value !== "number" || !Number.isFinite(value) || value < 0) {
    return { ok: false, reason: `${from} returned ${JSON.stringify(value) ?? String(value)}, not a finite load ≥ 0` };
  }
  return { ok: true, load: value };
}

/**
 * A Prometheus instant query over the HTTP API (`GET <url>/api/v1/query?query=…`). The answer must
 * be one number: a scalar, or a vector with exactly one sample. An empty vector is what Prometheus
 * answers when the series went stale (its target stopped answering), so it is a failed reading,
 * not a load of 0.
 */
export function prometheusLoadSource(url: string, query: string): LoadSource {
  const endpoint = new URL("api/v1/query", url.endsWith("/") ? url : `${url}/`);
  endpoint.searchParams.set("query", query);
  const description = `Prometheus ${url} query ${JSON.stringify(query)}`;
  return {
    description,
    async read(signal) {
      let body: unknown;
      try {
        const response = await fetch(endpoint, { signal, headers: { accept: "application/json" } });
        const text = await response.text();
        if (!response.ok) return { ok: false, reason: `Prometheus answered HTTP ${response.status}: ${text.slice(0, 200)}` };
        body = JSON.parse(text);
      } catch (error) {
        return { ok: false, reason: `Prometheus at ${url} did not answer (${reasonOf(error)})` };
      }
      return loadOfQueryAnswer(body);
    },
  };
}

/** The one number in a Prometheus query answer, or why there is none. */
export function loadOfQueryAnswer(body: unknown): LoadReading {
  if (typeof body !== "object" || body === null) return { ok: false, reason: "Prometheus answer is not a JSON object" };
  const answer = body as { status?: unknown; error?: unknown; data?: { resultType?: unknown; result?: unknown } };
  if (answer.status !== "success") return { ok: false, reason: `Prometheus query failed: ${String(answer.error ?? answer.status)}` };
  const { resultType, result } = answer.data ?? {};
  let sample: unknown;
  if (resultType === "scalar") {
    sample = result;
  } else if (resultType === "vector" && Array.isArray(result)) {
    if (result.length === 0) return { ok: false, reason: "the query returned no sample (empty or stale series)" };
    if (result.length > 1) return { ok: false, reason: `the query returned ${result.length} series, not one number; aggregate it (avg, max)` };
    sample = (result[0] as { value?: unknown }).value;
  } else {
    return { ok: false, reason: `the query returned a ${String(resultType)}, not one number` };
  }
  const raw = Array.isArray(sample) ? sample[1] : undefined;
  return checkLoad(typeof raw === "string" ? Number(raw) : raw, "the query");
}

/** A module whose default export `() => number | Promise<number>` returns the load. */
export function moduleLoadSource(modulePath: string, options: LoadSourceOptions = {}): LoadSource {
  const file = isAbsolute(modulePath) ? modulePath : resolve(options.baseDir ?? process.cwd(), modulePath);
  let loaded: Promise<() => unknown> | undefined;
  const load = async (): Promise<() => unknown> => {
    const exported: unknown = (await import(pathToFileURL(file).href)).default;
    if (typeof exported !== "function") throw new Error(`${file} has no default export function (got ${typeof exported})`);
    return exported as () => unknown;
  };
  return {
    description: `module ${file}`,
    async read() {
      try {
        loaded ??= load();
        const fn = await loaded;
        return checkLoad(await fn(), `module ${file}`);
      } catch (error) {
        loaded = undefined; // retry the import next time: the file may be fixed
        return { ok: false, reason: `load module ${file} failed (${reasonOf(error)})` };
      }
    },
  };
}

export function loadSourceOf(load: LoadSpec, options: LoadSourceOptions = {}): LoadSource {
  if (load.prometheus) return prometheusLoadSource(load.prometheus.url, load.prometheus.query);
  if (load.module !== undefined) return moduleLoadSource(load.module, options);
  // The schema refuses a load without a source; reaching this is a programming error.
  throw new Error("adaptive.load has neither prometheus nor module");
}
