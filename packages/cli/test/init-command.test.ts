// services: processes
import assert from "node:assert/strict";
import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, describe, it } from "node:test";
import { runSluice } from "./run-cli.ts";

// `sluice init` on its own; the scaffold installed and run from the packed tarballs is
// test/e2e/install-packages.test.ts.
describe("sluice init", () => {
  const base = mkdtempSync(join(tmpdir(), "sluice-init-"));
  after(() => rmSync(base, { recursive: true, force: true }));
  const version = (JSON.parse(readFileSync(new URL("../package.json", import.meta.url), "utf8")) as { version: string }).version;

  it("writes a project on the published package names, with a throttled pipeline and its two commands", () => {
    const dir = join(base, "My Pipeline");
    const run = runSluice("init", dir);
    assert.equal(run.code, 0, run.stderr);
    assert.match(run.stdout, /npm install\n {2}npm start\n$/);
    const manifest = JSON.parse(readFileSync(join(dir, "package.json"), "utf8")) as {
      name: string;
      dependencies: Record<string, string>;
      scripts: Record<string, string>;
    };
    assert.equal(manifest.name, "my-pipeline");
    assert.deepEqual(manifest.dependencies, { "@sluice/cli": `^${version}`, "@sluice/runtime": `^${version}` });
    assert.equal(manifest.scripts["start"], "sluice run pipeline.json --drain");
    const spec = JSON.parse(readFileSync(join(dir, "pipeline.json"), "utf8")) as {
      dynamic_spec: { throttlers: Record<string, { limit: number }>; computations: Record<string, unknown> };
    };
    assert.equal(spec.dynamic_spec.throttlers["orders_per_second"]?.limit, 100);
    assert.deepEqual(spec.dynamic_spec.computations, { Invoicer: { input_rows_throttler_id: "orders_per_second" } });
    assert.match(readFileSync(join(dir, "src/invoicer.ts"), "utf8"), /defineComputation<Order>/);
    const readme = readFileSync(join(dir, "README.md"), "utf8");
    assert.match(readme, /^npm install$/m);
    assert.match(readme, /^npm start /m);
  });

  it("refuses a directory that is not empty and writes nothing", () => {
    const dir = join(base, "taken");
    mkdirSync(dir);
    writeFileSync(join(dir, "notes.txt"), "mine\n");
    const run = runSluice("init", dir);
    assert.equal(run.code, 1);
    assert.match(run.stderr, /taken is not empty \(notes\.txt\); nothing was written/);
    assert.deepEqual(readFileSync(join(dir, "notes.txt"), "utf8"), "mine\n");
  });
});
