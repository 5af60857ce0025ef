import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { formatValue, PrometheusText } from "../src/index.ts";

describe("PrometheusText (prom-client)", () => {
  it("writes HELP and TYPE once per family, then its samples, and ends with a newline", async () => {
    const text = await new PrometheusText()
      .counter("jobs_total", "Jobs started.", [
        { labels: { queue: "a" }, value: 3 },
        { labels: { queue: "b" }, value: 0 },
      ])
      .gauge("temperature_celsius", "Now.", [{ labels: {}, value: -1.5 }])
      .render();
    assert.equal(
      text,
      [
        "# HELP jobs_total Jobs started.",
        "# TYPE jobs_total counter",
        'jobs_total{queue="a"} 3',
        'jobs_total{queue="b"} 0',
        "",
        "# HELP temperature_celsius Now.",
        "# TYPE temperature_celsius gauge",
        "temperature_celsius -1.5",
        "",
      ].join("\n"),
    );
  });

  it("writes a histogram as cumulative _bucket lines up to +Inf, then _sum and _count", async () => {
    const text = await new PrometheusText()
      .histogram("wait_ms", "Waits.", [10, 100], [{ labels: { id: "x" }, buckets: [1, 3], count: 4, sum: 250.5 }])
      .render();
    assert.equal(
      text,
      [
        "# HELP wait_ms Waits.",
        "# TYPE wait_ms histogram",
        'wait_ms_bucket{id="x",le="10"} 1',
        'wait_ms_bucket{id="x",le="100"} 3',
        'wait_ms_bucket{id="x",le="+Inf"} 4',
        'wait_ms_sum{id="x"} 250.5',
        'wait_ms_count{id="x"} 4',
        "",
      ].join("\n"),
    );
  });

  it("escapes label values and HELP text as the format requires", async () => {
    const text = await new PrometheusText().gauge("g", 'a \\ b\nc "d"', [{ labels: { id: 'quo"te \\ new\nline' }, value: 1 }]).render();
    assert.equal(text, ['# HELP g a \\\\ b\\nc "d"', "# TYPE g gauge", 'g{id="quo\\"te \\\\ new\\nline"} 1', ""].join("\n"));
  });

  it("spells special values as Prometheus parses them", async () => {
    assert.deepEqual(
      [formatValue(Number.NaN), formatValue(Infinity), formatValue(-Infinity), formatValue(0.1), formatValue(1e21)],
      ["NaN", "+Inf", "-Inf", "0.1", "1e+21"],
    );
    const text = await new PrometheusText()
      .gauge("limit", "x", [
        { labels: { id: "a" }, value: Infinity },
        { labels: { id: "b" }, value: Number.NaN },
      ])
      .render();
    assert.match(text, /^limit\{id="a"\} \+Inf$/m);
    // prom-client spells it "Nan"; Prometheus parses values with Go's ParseFloat, which ignores case.
    assert.match(text, /^limit\{id="b"\} (NaN|Nan)$/m);
  });

  it("refuses what a scraper would reject: a family twice, bad names, a counter without _total, a short histogram", () => {
    const out = new PrometheusText().gauge("g", "x", []);
    assert.throws(() => out.gauge("g", "x", []), /written twice/);
    assert.throws(() => new PrometheusText().gauge("1bad", "x", []), /not a valid Prometheus metric name/);
    assert.throws(() => new PrometheusText().gauge("g", "x", [{ labels: { "bad-label": "v" }, value: 1 }]), /"bad-label" is not a valid Prometheus label name/);
    assert.throws(() => new PrometheusText().counter("requests", "x", []), /must end in _total/);
    assert.throws(() => new PrometheusText().histogram("h", "x", [1, 2], [{ labels: {}, buckets: [1], count: 1, sum: 1 }]), /1 buckets for 2 bounds/);
  });

  it("writes an empty family as HELP and TYPE alone, and nothing at all as an empty body", async () => {
    assert.equal(await new PrometheusText().counter("none_total", "Nothing yet.", []).render(), "# HELP none_total Nothing yet.\n# TYPE none_total counter\n");
    assert.equal(await new PrometheusText().render(), "");
  });

  it("puts the process's default metrics (collectDefaultMetrics) before the families when asked", async () => {
    const text = await new PrometheusText().gauge("sluice_test_gauge", "x", [{ labels: {}, value: 7 }]).render({ processMetrics: true });
    for (const family of ["process_cpu_user_seconds_total", "process_resident_memory_bytes", "nodejs_eventloop_lag_seconds", "nodejs_heap_size_used_bytes"]) {
      assert.match(text, new RegExp(`^# TYPE ${family} `, "m"), `${family} missing`);
    }
    assert.match(text, /^sluice_test_gauge 7$/m);
    assert.ok(text.indexOf("process_cpu_user_seconds_total") < text.indexOf("sluice_test_gauge"));
    // A second scrape in the same process reuses the same collectors (no "already registered").
    assert.match(await new PrometheusText().render({ processMetrics: true }), /^# TYPE process_cpu_user_seconds_total counter$/m);
  });
});
