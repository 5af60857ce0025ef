import assert from "node:assert/strict";

// A strict reader of the Prometheus text format for tests: it checks what a Prometheus server would
// reject (a sample without a TYPE, a family declared twice, bad label syntax, histogram buckets that
// go down or disagree with _count) and returns the samples for assertions.

export interface ParsedSample {
  readonly name: string;
  readonly labels: Readonly<Record<string, string>>;
  readonly value: number;
}

export interface Exposition {
  readonly samples: readonly ParsedSample[];
  readonly types: ReadonlyMap<string, string>;
  readonly help: ReadonlyMap<string, string>;
  /** The one sample of `name` whose labels include all of `labels`; fails when there is none or more than one. */
  value(name: string, labels?: Record<string, string>): number;
  /** The sample's value, or undefined when absent. */
  find(name: string, labels?: Record<string, string>): number | undefined;
  /** Every sample of `name` whose labels include `labels`. */
  all(name: string, labels?: Record<string, string>): ParsedSample[];
}

const SAMPLE = /^([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{(.*)\})? (\S+)$/;
const LABEL = /([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"(?:,|$)/y;

export function parseExposition(text: string): Exposition {
  assert.ok(text.endsWith("\n"), "an exposition ends with a newline");
  const types = new Map<string, string>();
  const help = new Map<string, string>();
  const samples: ParsedSample[] = [];
  for (const line of text.split("\n")) {
    if (line === "") continue;
    if (line.startsWith("# HELP ")) {
      const [name, ...rest] = line.slice(7).split(" ");
      assert.ok(name && !help.has(name), `HELP of ${name} once`);
      help.set(name, rest.join(" "));
      continue;
    }
    if (line.startsWith("# TYPE ")) {
      const [name, type] = line.slice(7).split(" ");
      assert.ok(name && type && !types.has(name), `TYPE of ${name} once`);
      assert.ok(["counter", "gauge", "histogram", "summary", "untyped"].includes(type), `type ${type}`);
      types.set(name, type);
      continue;
    }
    assert.ok(!line.startsWith("#"), `unexpected comment: ${line}`);
    const match = SAMPLE.exec(line);
    assert.ok(match, `not a sample line: ${JSON.stringify(line)}`);
    const [, name = "", rawLabels = "", rawValue = ""] = match;
    const labels: Record<string, string> = {};
    LABEL.lastIndex = 0;
    while (LABEL.lastIndex < rawLabels.length) {
      const label = LABEL.exec(rawLabels);
      assert.ok(label, `bad labels in ${line}`);
      labels[label[1] ?? ""] = (label[2] ?? "").replace(/\\n/g, "\n").replace(/\\"/g, '"').replace(/\\\\/g, "\\");
    }
    const value = rawValue === "+Inf" ? Infinity : rawValue === "-Inf" ? -Infinity : Number(rawValue);
    // Prometheus reads values with Go's ParseFloat, which takes NaN in any case (prom-client writes "Nan").
    assert.ok(rawValue.toLowerCase() === "nan" || !Number.isNaN(value), `bad value in ${line}`);
    const family = familyOf(name, types);
    assert.ok(family, `sample ${name} has no TYPE line before it`);
    samples.push({ name, labels, value });
  }
  checkHistograms(samples, types);

  const all = (name: string, labels: Record<string, string> = {}) =>
    samples.filter((s) => s.name === name && Object.entries(labels).every(([k, v]) => s.labels[k] === v));
  return {
    samples,
    types,
    help,
    all,
    find(name, labels) {
      const found = all(name, labels);
      assert.ok(found.length <= 1, `${found.length} samples of ${name} ${JSON.stringify(labels ?? {})}`);
      return found[0]?.value;
    },
    value(name, labels) {
      const found = all(name, labels);
      assert.equal(found.length, 1, `exactly one sample of ${name} ${JSON.stringify(labels ?? {})}; got ${found.length}`);
      return found[0]?.value ?? Number.NaN;
    },
  };
}

function familyOf(name: string, types: ReadonlyMap<string, string>): string | undefined {
  if (types.has(name)) return name;
  for (const suffix of ["_bucket", "_sum", "_count"]) {
    const base = name.endsWith(suffix) ? name.slice(0, -suffix.length) : null;
    if (base !== null && types.get(base) === "histogram") return base;
  }
  return undefined;
}

function checkHistograms(samples: readonly ParsedSample[], types: ReadonlyMap<string, string>): void {
  for (const [family, type] of types) {
    if (type !== "histogram") continue;
    const series = new Map<string, ParsedSample[]>();
    for (const s of samples.filter((x) => x.name === `${family}_bucket`)) {
      const { le: _le, ...rest } = s.labels;
      const key = JSON.stringify(rest);
      series.set(key, [...(series.get(key) ?? []), s]);
    }
    for (const [key, buckets] of series) {
      let last = 0;
      for (const bucket of buckets) {
        assert.ok(bucket.value >= last, `${family}${key}: bucket le=${bucket.labels["le"]} goes down`);
        last = bucket.value;
      }
      assert.equal(buckets.at(-1)?.labels["le"], "+Inf", `${family}${key} ends with le="+Inf"`);
      const count = samples.find((s) => s.name === `${family}_count` && JSON.stringify(s.labels) === key);
      assert.equal(count?.value, last, `${family}${key}: _count equals the +Inf bucket`);
    }
  }
}

/** GET a URL on this machine; every wait bounded. */
export async function get(url: string, timeoutMs = 5_000): Promise<{ status: number; type: string; body: string }> {
  const response = await fetch(url, { signal: AbortSignal.timeout(timeoutMs) });
  return { status: response.status, type: response.headers.get("content-type") ?? "", body: await response.text() };
}

export async function scrape(url: string): Promise<Exposition> {
  const response = await get(url);
  assert.equal(response.status, 200, `GET ${url}: ${response.status} ${response.body}`);
  assert.match(response.type, /^text\/plain; version=0\.0\.4/);
  return parseExposition(response.body);
}

/** Scrapes until `done` holds (or fails after timeoutMs with the last exposition's figures). */
export async function scrapeUntil(url: string, done: (e: Exposition) => boolean, timeoutMs: number, what: string): Promise<Exposition> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const exposition = await scrape(url);
    if (done(exposition)) return exposition;
    if (Date.now() > deadline) throw new Error(`${what}: not reached after ${timeoutMs} ms`);
    await new Promise((resolve) => setTimeout(resolve, 200));
  }
}
