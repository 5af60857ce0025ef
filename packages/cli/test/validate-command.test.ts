// services: processes
import assert from "node:assert/strict";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, before, describe, it } from "node:test";
import { runSluice } from "./run-cli.ts";

describe("sluice validate", () => {
  it("accepts the quickstart spec and prints a one-line summary", () => {
    const run = runSluice("validate", "examples/quickstart/pipeline.json");
    assert.equal(run.code, 0, run.stderr);
    assert.equal(run.stdout, "✓ quickstart: 2 streams, 1 computation, 1 throttler (rows_quota: 500/s)\n");
    assert.equal(run.stderr, "");
  });

  describe("on a spec with several problems", () => {
    let dir = "";
    before(() => {
      dir = mkdtempSync(join(tmpdir(), "sluice-validate-"));
      writeFileSync(join(dir, "package.json"), JSON.stringify({ type: "module" }));
      writeFileSync(join(dir, "plain.ts"), "export default { async process(): Promise<void> {} };\n");
      writeFileSync(join(dir, "throws.ts"), 'throw new Error("cannot start without API_KEY");\n');
      writeFileSync(join(dir, "good.ts"), 'export default { [Symbol.for("sluice.computation")]: true };\n');
      writeFileSync(join(dir, "generate.mjs"), "export default 5;\n");
      writeFileSync(
        join(dir, "pipeline.json"),
        JSON.stringify({
          pipeline: "broken",
          streams: {
            in: { topic: "in", generator: { module: "./generate.mjs", messages: 10 } },
            out: { topic: "out" },
          },
          computations: {
            Missing: { module: "./missing.ts", inputs: ["in"] },
            Plain: { module: "./plain.ts", inputs: ["inn"], outputs: ["out"] },
            Throws: { module: "./throws.ts", inputs: ["in"] },
            Good: { module: "./good.ts", inputs: ["in"] },
          },
          dynamic_spec: {
            throttlers: { q: { limit: 10, request_periud: "1s", classes: { vip: { weight: -1 } } } },
            computations: { Good: { input_rows_throttler_id: "api_quota" } },
          },
        }),
      );
    });
    after(() => rmSync(dir, { recursive: true, force: true }));

    it("prints every issue with its path and exits 1", () => {
      const run = runSluice("validate", join(dir, "pipeline.json"));
      assert.equal(run.code, 1, run.stdout);
      assert.equal(run.stdout, "");
      const lines = run.stderr.trimEnd().split("\n");
      const expected = [
        `✗ computations.Missing.module: module file not found: ${join(dir, "missing.ts")}`,
        '✗ computations.Plain.inputs[0]: stream "inn" is not declared in streams',
        `✗ computations.Plain.module: ${join(dir, "plain.ts")}: its default export is not a computation`,
        `✗ computations.Throws.module: importing ${join(dir, "throws.ts")} failed: cannot start without API_KEY`,
        '✗ dynamic_spec.computations.Good.input_rows_throttler_id: throttler "api_quota" is not declared',
        "✗ dynamic_spec.throttlers.q.classes.vip.weight: weight must be a finite number greater than 0, got -1",
        '✗ dynamic_spec.throttlers.q.request_periud: unknown key "request_periud"; did you mean "request_period"?',
        "✗ streams.in.generator.module: " + join(dir, "generate.mjs") + ": its default export must be a function",
      ];
      assert.equal(lines.length, expected.length + 1, run.stderr);
      expected.forEach((start, index) => {
        assert.ok(lines[index]?.startsWith(start), `line ${index + 1}:\n  ${lines[index]}\nshould start with\n  ${start}`);
      });
      assert.equal(lines.at(-1), `8 issues in ${join(dir, "pipeline.json")}`);
    });

    it("reports a JSON syntax error with its line and column", () => {
      const path = join(dir, "syntax.json");
      writeFileSync(path, '{\n  "pipeline": "x",\n  "streams": { "a": { "topic": "a", } }\n}\n');
      const run = runSluice("validate", path);
      assert.equal(run.code, 1);
      assert.match(run.stderr, /^✗ \(root\): .*syntax\.json is not valid JSON at line 3, column 37: .*trailing comma/m);
    });

    it("reports where a spec nested 200,000 deep goes wrong, without a stack overflow", () => {
      const path = join(dir, "deep.json");
      writeFileSync(path, `{"pipeline": ${"[".repeat(200_000)}`);
      const run = runSluice("validate", path);
      assert.equal(run.code, 1);
      assert.match(run.stderr, /^✗ \(root\): .*deep\.json is not valid JSON at line 1, column 200014: /m);
      assert.doesNotMatch(run.stderr, /RangeError|call stack/);
    });

    it("reports a missing spec file", () => {
      const run = runSluice("validate", join(dir, "absent.json"));
      assert.equal(run.code, 1);
      assert.match(run.stderr, /^✗ \(root\): cannot read the spec file .*absent\.json: no such file$/m);
      assert.match(run.stderr, /^1 issue in /m);
    });
  });
});

describe("sluice schema", () => {
  it("prints the pipeline JSON Schema as parseable JSON", () => {
    const run = runSluice("schema");
    assert.equal(run.code, 0, run.stderr);
    const schema = JSON.parse(run.stdout) as { title?: string; properties?: Record<string, unknown> };
    assert.equal(schema.title, "Sluice pipeline spec");
    assert.ok(schema.properties?.["dynamic_spec"]);
  });

  it("prints the dynamic_spec schema on request", () => {
    const run = runSluice("schema", "--dynamic-spec");
    assert.equal(run.code, 0, run.stderr);
    const schema = JSON.parse(run.stdout) as { properties?: Record<string, unknown> };
    assert.deepEqual(Object.keys(schema.properties ?? {}).sort(), ["computations", "throttlers"]);
  });
});

describe("sluice usage errors", () => {
  for (const args of [["frobnicate"], ["validate"], ["validate", "a.json", "b.json"], ["schema", "--bogus"], []]) {
    it(`exits 2 for \`sluice ${args.join(" ")}\``, () => {
      const run = runSluice(...args);
      assert.equal(run.code, 2, `stdout: ${run.stdout}\nstderr: ${run.stderr}`);
      assert.notEqual(run.stderr, "");
    });
  }

  it("exits 0 for --help", () => {
    const run = runSluice("--help");
    assert.equal(run.code, 0);
    assert.match(run.stdout, /validate <spec\.json>/);
  });
});
