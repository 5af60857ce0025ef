// services: processes
// heavy: takes two of the end-to-end lane's slots (many processes, a browser or a private broker)
// Sluice as a user outside this repository gets it: `pnpm pack:all`, a project scaffolded by
// `sluice init` in a temporary folder outside the repository, ONE `npm install` of the tarballs
// (third-party dependencies from the npm registry), then with what npm installed only:
// a TypeScript and a JavaScript computation through `npx sluice run … --drain`, `npx sluice validate`,
// `tsc` on the computation types (and a deliberate type error failing it), and a plain Node script
// using @sluice/client's connectThrottlers against the installed `sluice controller`.
import assert from "node:assert/strict";
import { spawn } from "node:child_process";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, before, describe, it } from "node:test";
import { BUILT_PACKAGES_FLAGS, Child, ROOT, SLUICE_BIN } from "../support/processes.ts";

/** One install from the registry per run: bounded, and the figure docs/internals/measurements.md quotes is printed. */
const NPM_INSTALL_TIMEOUT_MS = 5 * 60_000;

const work = mkdtempSync(join(tmpdir(), "sluice-install-"));
const app = join(work, "app");
const children: Child[] = [];
let tarballs: string[] = [];

after(() => {
  for (const child of children) child.kill("SIGKILL");
  rmSync(work, { recursive: true, force: true });
});

interface Ran {
  readonly status: number | null;
  readonly stdout: string;
  readonly stderr: string;
}

/** Runs a command to its end (killed after `timeoutMs`); several run at once, as the tests below do. */
async function run(command: string, args: readonly string[], cwd: string, timeoutMs = 120_000): Promise<Ran> {
  const child = spawn(command, [...args], {
    cwd,
    env: { ...process.env, NO_COLOR: "1", npm_config_update_notifier: "false" },
    stdio: ["ignore", "pipe", "pipe"],
  });
  let stdout = "";
  let stderr = "";
  child.stdout.on("data", (chunk: Buffer) => (stdout += chunk.toString()));
  child.stderr.on("data", (chunk: Buffer) => (stderr += chunk.toString()));
  const timer = setTimeout(() => child.kill("SIGKILL"), timeoutMs);
  try {
    const status = await new Promise<number | null>((resolve, reject) => {
      child.on("error", (error) => reject(new Error(`${command} ${args.join(" ")} in ${cwd}: ${error.message}\n${stdout}\n${stderr}`)));
      child.on("close", (code, signal) => resolve(signal === "SIGKILL" ? null : code));
    });
    return { status, stdout, stderr };
  } finally {
    clearTimeout(timer);
  }
}

function ok(result: Ran, what: string): string {
  assert.equal(result.status, 0, `${what} exited ${result.status}\nstdout:\n${result.stdout}\nstderr:\n${result.stderr}`);
  return result.stdout;
}

/** The installed command only: `npx --no` never fetches anything. */
function npxSluice(...args: string[]): Promise<Ran> {
  return run("npx", ["--no", "--", "sluice", ...args], app);
}

// The tests share the installed project and touch different files of it: they run side by side
// (each mostly waits for the processes it starts).
describe("the packed packages, installed with npm outside the repository", { concurrency: true }, () => {
  before(async () => {
    const packStarted = Date.now();
    // Under the test runner the packages are built already, and other tests' children are running
    // that dist/: packing it as it is leaves it in place (a rebuild would delete it under them).
    const prebuilt = process.env["SLUICE_E2E_BUILT"] === "1" ? ["--prebuilt"] : [];
    const pack = ok(await run("node", ["scripts/pack-all.mjs", ...prebuilt], ROOT, 180_000), "pnpm pack:all");
    tarballs = [...pack.matchAll(/^(dist\/packages\/\S+\.tgz)/gm)].map((m) => join(ROOT, m[1] ?? ""));
    console.log(`# pack:all: ${tarballs.length} tarballs in ${((Date.now() - packStarted) / 1000).toFixed(1)} s`);
    assert.ok(tarballs.some((t) => t.includes("sluice-cli-")) && tarballs.some((t) => t.includes("sluice-client-")), pack);

    ok(await run(process.execPath, [...BUILT_PACKAGES_FLAGS, SLUICE_BIN, "init", app], work), "sluice init");
    writeFileSync(join(app, "src/shout.mjs"), SHOUT_JS);
    // biome-ignore lint/suspicious/noTemplateCurlyInString: JavaScript source for a file, with a template literal of its own
    writeFileSync(join(app, "src/words.mjs"), "export default (index) => ({ key: String(index), value: `word ${index}` });\n");
    writeFileSync(join(app, "js-pipeline.json"), JSON.stringify(JS_PIPELINE, null, 2));
    writeFileSync(join(app, "standalone-client.mjs"), STANDALONE_CLIENT_JS);

    const installStarted = Date.now();
    // --prefer-offline: package metadata already in npm's cache is not asked for again (a fresh
    // machine fetches everything as before); the tarballs of this run are always new.
    ok(await run("npm", ["install", "--no-audit", "--no-fund", "--prefer-offline", ...tarballs], app, NPM_INSTALL_TIMEOUT_MS), "npm install of the tarballs");
    console.log(`# npm install: ${((Date.now() - installStarted) / 1000).toFixed(1)} s`);
  });

  it("runs the TypeScript computation `sluice init` scaffolded, through the installed CLI", async () => {
    const out = ok(await npxSluice("run", "pipeline.json", "--drain", "--quiet"), "npx sluice run pipeline.json --drain");
    assert.match(out, /Invoicer: processed 300 rows .* 0 failures/);
  });

  it("runs a JavaScript computation", async () => {
    const out = ok(await npxSluice("run", "js-pipeline.json", "--drain", "--quiet"), "npx sluice run js-pipeline.json --drain");
    assert.match(out, /Shout: processed 40 rows .* 0 failures/);
  });

  it("validates a spec, and names what is wrong in a broken one", async () => {
    assert.match(
      ok(await npxSluice("validate", "pipeline.json"), "npx sluice validate"),
      /✓ app: 2 streams, 1 computation, 1 throttler \(orders_per_second: 100\/s\)/,
    );
    writeFileSync(
      join(app, "broken.json"),
      JSON.stringify({ ...JS_PIPELINE, computations: { Shout: { ...JS_PIPELINE.computations.Shout, inputs: ["wordz"] } } }),
    );
    const broken = await npxSluice("validate", "broken.json");
    assert.equal(broken.status, 1, broken.stdout + broken.stderr);
    assert.match(broken.stderr, /computations\.Shout\.inputs/);
  });

  it("type-checks the computation types with tsc, and a deliberate type error fails it", async () => {
    ok(await run("npx", ["--no", "--", "tsc", "-p", "tsconfig.json"], app), "tsc on the scaffolded project");
    writeFileSync(
      join(app, "src/wrong.ts"),
      `import { defineComputation } from "@sluice/runtime";
export default defineComputation<{ n: number }>({
  process(batch, ctx) {
    for (const m of batch.messages) ctx.emit("out", { value: m.value.n.toUpperCase() });
  },
});
`,
    );
    const failed = await run("npx", ["--no", "--", "tsc", "-p", "tsconfig.json"], app);
    rmSync(join(app, "src/wrong.ts"));
    assert.notEqual(failed.status, 0, "tsc accepted a type error");
    assert.match(failed.stdout, /src\/wrong\.ts\(4,\d+\): error TS2339: Property 'toUpperCase' does not exist on type 'number'/);
  });

  it("gives a plain Node script the installed controller's throttlers through @sluice/client", async () => {
    // The installed bin itself rather than npx: npx runs it through a shell, and a kill by pid would
    // end the shell but not the controller.
    const bin = join(app, "node_modules/.bin/sluice");
    const controller = new Child(spawn(bin, ["controller", "pipeline.json", "--port", "0"], { cwd: app, stdio: ["ignore", "pipe", "pipe"] }));
    children.push(controller);
    const port = (await controller.waitFor(/listening on 127\.0\.0\.1:(\d+)/, 120_000))[1];
    let out: string;
    try {
      out = ok(await run("node", ["standalone-client.mjs", `127.0.0.1:${port}`], app, 60_000), "node standalone-client.mjs");
    } finally {
      controller.kill("SIGTERM");
    }
    const result = JSON.parse(out.trim().split("\n").at(-1) ?? "{}") as { consumed: number; elapsedMs: number; version: number; undeclared: string };
    assert.equal(result.consumed, 150);
    assert.equal(result.version, 1);
    assert.equal(result.undeclared, "THROTTLER_NOT_DECLARED");
    // 150 units at 100/s from a full bucket of 100: the bucket may lend one prefetch window
    // (ceil(limit × request_period) = 20, pay-after) on top, so the last 30 need at least 0.3 s.
    assert.ok(result.elapsedMs >= 250, `150 units at limit 100/s took only ${result.elapsedMs} ms`);
    assert.equal((await controller.exited).code, 0, `the controller did not stop cleanly on SIGTERM:\n${controller.stderr}`);
  });
});

const SHOUT_JS = `// A computation in plain JavaScript: no types, no build step.
import { defineComputation } from "@sluice/runtime";

export default defineComputation({
  process(batch, ctx) {
    for (const message of batch.messages) ctx.emit("shouted", { key: message.key, value: String(message.value).toUpperCase() });
  },
});
`;

const JS_PIPELINE = {
  pipeline: "js-app",
  streams: {
    words: { topic: "words", format: "string", partitions: 1, generator: { module: "./src/words.mjs", messages: 40 } },
    shouted: { topic: "shouted", format: "string", partitions: 1 },
  },
  computations: { Shout: { module: "./src/shout.mjs", inputs: ["words"], outputs: ["shouted"] } },
  dynamic_spec: { throttlers: { words_quota: { limit: 1000 } }, computations: { Shout: { input_rows_throttler_id: "words_quota" } } },
};

const STANDALONE_CLIENT_JS = `// A plain Node service protecting an external API with the controller's throttler.
import { connectThrottlers } from "@sluice/client";

const throttlers = await connectThrottlers({ controller: process.argv[2], clientId: "billing-1", log: null });
const api = throttlers.getThrottlerOrThrow("orders_per_second");
let undeclared = "";
try {
  throttlers.getThrottlerOrThrow("nope");
} catch (error) {
  undeclared = error.code;
}
const startedAt = Date.now();
let consumed = 0;
for (let i = 0; i < 150; i++) {
  await api.throttle(1);
  consumed += 1;
}
const elapsedMs = Date.now() - startedAt;
const version = throttlers.dynamicSpecVersion;
await throttlers.close();
console.log(JSON.stringify({ consumed, elapsedMs, version, undeclared }));
`;
