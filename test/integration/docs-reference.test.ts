import assert from "node:assert/strict";
import { readdirSync, readFileSync } from "node:fs";
import { join, resolve } from "node:path";
import { fileURLToPath } from "node:url";
import { describe, it } from "node:test";
import { pipelineJsonSchema } from "@sluice/spec";
import { sluiceProgram } from "../../packages/cli/src/main.ts";
import { controllerMetricFamilies, workerMetricFamilies } from "../../scripts/docs-reference/metrics-reference.ts";
import { referencePages, REGENERATE_COMMAND } from "../../scripts/docs-reference/pages.ts";
import { specFields } from "../../scripts/docs-reference/spec-reference.ts";

// docs/reference/ is generated from the code (`pnpm docs:reference`). These tests regenerate every
// page in memory and compare it with the committed one, and check that the code holds a description
// for everything the pages list, so a reference is never stale nor silent about a field.

const root = resolve(fileURLToPath(import.meta.url), "../../..");

function sourceFiles(dir: string): string[] {
  return readdirSync(dir, { withFileTypes: true }).flatMap((entry) => {
    const path = join(dir, entry.name);
    if (entry.isDirectory()) return entry.name === "node_modules" ? [] : sourceFiles(path);
    return entry.name.endsWith(".ts") ? [path] : [];
  });
}

describe("generated references (docs/reference)", () => {
  const pages = referencePages();

  for (const [path, content] of pages) {
    it(`${path} is up to date with the code`, () => {
      let committed: string;
      try {
        committed = readFileSync(resolve(root, path), "utf8");
      } catch {
        assert.fail(`${path} does not exist: run \`${REGENERATE_COMMAND}\` and commit it`);
      }
      assert.ok(committed === content, `${path} is stale: run \`${REGENERATE_COMMAND}\` and commit the result`);
    });
  }

  it("every spec field has a description (zod .describe())", () => {
    const fields = specFields(pipelineJsonSchema());
    assert.ok(fields.length > 50, `only ${fields.length} spec fields found: the schema walk is broken`);
    const silent = fields.filter((f) => f.description === "").map((f) => f.path);
    assert.deepEqual(silent, [], "add a .describe() to these fields of the zod schema in packages/spec");
  });

  it("lists a field of several union variants once, and follows $defs references", () => {
    const schema = {
      type: "object",
      $defs: { Window: { type: "string", description: "A window." } },
      properties: {
        throttler: {
          description: "A throttler.",
          anyOf: [
            {
              type: "object",
              properties: { kind: { enum: ["rate"], description: "Rate." }, limit: { type: "number", description: "Units per second." } },
              required: ["kind"],
            },
            {
              type: "object",
              properties: { kind: { enum: ["keyed"], description: "Keyed." }, limit: { type: "number", description: "Units per second." } },
              required: ["kind"],
            },
          ],
        },
        window: { $ref: "#/$defs/Window" },
      },
    };
    const rows = specFields(schema).map((f) => [f.path, f.type, f.required, f.description]);
    assert.deepEqual(rows, [
      ["throttler", "object", false, "A throttler."],
      ["throttler.kind", '"rate" or "keyed"', true, "Rate. — Keyed."],
      ["throttler.limit", "number", false, "Units per second."],
      ["window", "string", false, "A window."],
    ]);
  });

  it("every command and option of the CLI has a description", () => {
    const ignore = () => undefined;
    const program = sluiceProgram({ stdout: ignore, stderr: ignore, setExitCode: ignore });
    assert.ok(program.commands.length >= 8, `${program.commands.length} commands`);
    const silent = program.commands.flatMap((c) => [
      ...(c.description() === "" ? [`sluice ${c.name()}`] : []),
      ...c.options.filter((o) => !o.description).map((o) => `sluice ${c.name()} ${o.flags}`),
      ...c.registeredArguments.filter((a) => !a.description).map((a) => `sluice ${c.name()} <${a.name()}>`),
    ]);
    assert.deepEqual(silent, [], "describe these in packages/cli/src/commands");
  });

  it("every metric family has a help text and known labels", () => {
    for (const family of [...controllerMetricFamilies(), ...workerMetricFamilies()]) {
      assert.ok(family.help.trim() !== "", `${family.name} has no help text`);
      assert.notEqual(
        family.labels,
        null,
        `${family.name}: its writer wrote no series for the probe snapshot, so its labels are unknown (see scripts/docs-reference/metric-probe.ts)`,
      );
    }
  });

  it("every metric name in packages/*/src is in the metrics reference", () => {
    const page = pages.get("docs/reference/metrics.md") ?? "";
    const names = new Set<string>();
    for (const file of sourceFiles(resolve(root, "packages")).filter((f) => f.includes("/src/"))) {
      for (const match of readFileSync(file, "utf8").matchAll(/["'`](sluice_(?:controller|worker)_[a-z0-9_]+)["'`]/g)) names.add(match[1] ?? "");
    }
    assert.ok(names.size > 40, `only ${names.size} metric names found in the sources`);
    const missing = [...names].filter((name) => !page.includes(`\`${name}\``)).sort();
    assert.deepEqual(missing, [], "written by code the metric writers do not reach: extend scripts/docs-reference/metrics-reference.ts");
  });
});
