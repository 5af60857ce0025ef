import assert from "node:assert/strict";
import { mkdtempSync, readFileSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { fileURLToPath } from "node:url";
import { describe, it } from "node:test";
import { validatePipelineSpec } from "@sluice/spec";
import { loadSourcesOf, namesLoadModule } from "../src/load-sources.ts";

const ROOT = resolve(fileURLToPath(import.meta.url), "../../../..");

describe("the CLI's adaptive load sources", () => {
  const dir = mkdtempSync(join(tmpdir(), "sluice-load-sources-"));
  writeFileSync(join(dir, "load.mjs"), "export default async () => 0.5;\n");

  it("runs beforeModules before a load module's first reading, not for Prometheus", async () => {
    const calls: string[] = [];
    const sourceOf = loadSourcesOf(dir, async () => {
      calls.push("before");
    });
    const reading = await sourceOf("api", { module: "./load.mjs" }).read(new AbortController().signal);
    assert.deepEqual(reading, { ok: true, load: 0.5 });
    assert.deepEqual(calls, ["before"]);
    sourceOf("api", { prometheus: { url: "http://127.0.0.1:1", query: "up" } });
    assert.deepEqual(calls, ["before"]);
  });

  it("answers a failed registration as a reading with its reason, never by throwing", async () => {
    const sourceOf = loadSourcesOf(dir, async () => {
      throw new Error("tsx is missing");
    });
    const reading = await sourceOf("api", { module: "./load.mjs" }).read(new AbortController().signal);
    assert.equal(reading.ok, false);
    assert.match(reading.ok ? "" : reading.reason, /registering tsx to load .*failed \(tsx is missing\)/);
  });

  it("sees a spec whose throttler reads its load from a module", () => {
    const example = JSON.parse(readFileSync(join(ROOT, "examples/cluster-admission/pipeline.json"), "utf8"));
    const throttlers = Object.values(example.dynamic_spec.throttlers) as { adaptive?: { load: unknown } }[];
    const prometheus = validatePipelineSpec(example);
    for (const throttler of throttlers) if (throttler.adaptive) throttler.adaptive.load = { module: "./load.ts" };
    const withModule = validatePipelineSpec(example);
    assert.ok(prometheus.ok && withModule.ok, JSON.stringify([prometheus, withModule]));
    assert.equal(namesLoadModule(prometheus.value), false);
    assert.equal(namesLoadModule(withModule.value), true);
  });
});
