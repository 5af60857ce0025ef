// services: processes, python
// clients/python's tests (python3 -m pytest) against a real `sluice controller` child started here,
// with a token, on a free port; the throttlers they use are declared below. `.ci/run` installs
// clients/python/requirements-dev.txt (grpcio, grpcio-tools, pytest).
import assert from "node:assert/strict";
import { spawn, spawnSync } from "node:child_process";
import { readdirSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { after, describe, it } from "node:test";
import { ERROR_CODES } from "@sluice/core";
import { GRPC_STATUS_BY_CODE, grpcStatusName } from "@sluice/protocol";
import { Child, NOOP_COMPUTATION, ROOT, sluice, writeSpec } from "../support/processes.ts";

const children: Child[] = [];
after(() => {
  for (const child of children) child.kill("SIGKILL");
});

// These two run side by side, each against a controller of its own: both mostly wait on Python
// processes and the throttlers' rates, one after the other they held the lane's slot for the sum.
describe("the Python client against real controllers", { concurrency: true }, () => {
  it("the Python client's tests pass against a real controller", async () => {
    const spec = writeSpec({
      pipeline: "python-client",
      streams: { input: { topic: "input" } },
      computations: { Reader: { module: NOOP_COMPUTATION, inputs: ["input"] } },
      dynamic_spec: {
        throttlers: {
          py_rate: { limit: 20, period: "1s" },
          py_slow: { limit: 1, period: "1s" },
          py_tiny: { limit: 1, period: "1s", max_queue_size: 1 },
          py_keyed: { limit: 10, period: "1s", keyed: { overrides: { gold: { limit: 30 } } } },
          py_few_keys: { limit: 100, period: "1s", keyed: { max_keys: 1 } },
        },
        computations: {},
      },
    });
    const token = `py-${process.pid}-${Date.now()}`;
    const controller = sluice(["controller", spec, "--port", "0", "--token", token]);
    children.push(controller);
    const port = (await controller.waitFor(/listening on 127\.0\.0\.1:(\d+)/))[1];

    const pytest = new Child(
      spawn("python3", ["-m", "pytest", "-q", "--color=no", "-p", "no:cacheprovider", "tests"], {
        cwd: join(ROOT, "clients/python"),
        env: { ...process.env, SLUICE_CONTROLLER: `127.0.0.1:${port}`, SLUICE_CONTROLLER_TOKEN: token, PYTHONDONTWRITEBYTECODE: "1" },
        stdio: ["ignore", "pipe", "pipe"],
      }),
    );
    children.push(pytest);
    const { code } = await pytest.exited;
    console.log(pytest.stdout.trim().split("\n").at(-1));
    assert.equal(code, 0, `python3 -m pytest failed (exit ${code})\nstdout:\n${pytest.stdout}\nstderr:\n${pytest.stderr}`);
    assert.match(pytest.stdout, /\b13 passed\b/);
  });

  it("a Python for_key handle stays valid across sluice reconfigure: an override reaches it, keyed removed and back", async () => {
    const specOf = (throttler: object) =>
      writeSpec({
        pipeline: "python-key-handle",
        streams: { input: { topic: "input" } },
        computations: { Reader: { module: NOOP_COMPUTATION, inputs: ["input"] } },
        dynamic_spec: { throttlers: { py_live: throttler }, computations: {} },
      });
    const token = `py-key-${process.pid}-${Date.now()}`;
    const controller = sluice(["controller", specOf({ limit: 5, period: "1s", keyed: {} }), "--port", "0", "--token", token]);
    children.push(controller);
    const address = `127.0.0.1:${(await controller.waitFor(/listening on 127\.0\.0\.1:(\d+)/))[1]}`;
    const reconfigure = async (throttler: object) => {
      const run = sluice(["reconfigure", specOf(throttler), "--controller", address, "--token", token]);
      children.push(run);
      assert.equal((await run.exited).code, 0, run.stderr);
    };
    const python = new Child(
      spawn("python3", [join(ROOT, "test/fixtures/python-key-handle.py")], {
        cwd: join(ROOT, "clients/python"),
        env: {
          ...process.env,
          PYTHONPATH: join(ROOT, "clients/python"), // the script runs from test/fixtures, the package is here
          SLUICE_CONTROLLER: address,
          SLUICE_CONTROLLER_TOKEN: token,
          THROTTLER: "py_live",
          KEY: "acme",
          DRAIN: "5",
          PYTHONDONTWRITEBYTECODE: "1",
        },
        stdio: ["pipe", "pipe", "pipe"],
      }),
    );
    children.push(python);
    await python.waitFor(/^ready$/m);
    const count = async (label: string) => {
      python.send(`count ${label} 2`);
      const [, n, seconds] = await python.waitFor(new RegExp(`^${label}: count (\\d+) ([\\d.]+)$`, "m"));
      return { n: Number(n), seconds: Number(seconds) };
    };
    const once = async (label: string) => {
      python.send(`once ${label}`);
      return (await python.waitFor(new RegExp(`^${label}: (.*)$`, "m")))[1] ?? "";
    };

    // The template's 5/s: at most 5 × T, plus one unit of pay-after debt, plus up to the bucket's
    // capacity (5) refilled between the drain and the window (the pace of this test, not the client).
    const before = await count("before");
    assert.ok(before.n <= 5 + 5 * before.seconds + 2, `before: ${before.n} units in ${before.seconds} s at 5/s`);
    // An override for the handle's key: the same handle now runs at 50/s. Bounds are loose (a loaded
    // machine, one RPC per unit): at least half of 50/s, at most 50/s plus its bucket's capacity.
    await reconfigure({ limit: 5, period: "1s", keyed: { overrides: { acme: { limit: 50 } } } });
    const after = await count("after");
    assert.ok(after.n >= 25 * after.seconds, `after the override: ${after.n} units in ${after.seconds} s, expected about 50/s`);
    assert.ok(after.n <= 50 + 50 * after.seconds + 2, `after the override: ${after.n} units in ${after.seconds} s exceeds 50/s`);
    console.log(`key acme: ${before.n} units in ${before.seconds} s at 5/s, ${after.n} in ${after.seconds} s after the override to 50/s`);
    assert.ok(after.n > 2 * before.n, `the override did not reach the handle: ${before.n} then ${after.n}`);
    // `keyed` removed: the controller refuses the key naming the throttler; declared keyed again, the
    // same handle works again.
    await reconfigure({ limit: 5, period: "1s" });
    assert.match(await once("unkeyed"), /^error INVALID_REQUEST .*"py_live" is not keyed/);
    await reconfigure({ limit: 5, period: "1s", keyed: {} });
    assert.equal(await once("keyed-again"), "ok");
    python.process.stdin?.end();
    assert.equal((await python.exited).code, 0, python.stderr);
  });
});

it("the Python client knows every error code of docs/design.md §4.5, with the same retriability and gRPC status", () => {
  const script = "import json; from sluice_client import ERROR_CODES; print(json.dumps({c: [r, s.name if s else None] for c, (r, s) in ERROR_CODES.items()}))";
  const run = spawnSync("python3", ["-c", script], { cwd: join(ROOT, "clients/python"), encoding: "utf8", timeout: 60_000 });
  assert.equal(run.status, 0, run.stderr);
  const python = JSON.parse(run.stdout) as Record<string, [boolean, string | null]>;
  const expected = Object.fromEntries(
    Object.entries(ERROR_CODES).map(([code, { retriable }]) => {
      const status = GRPC_STATUS_BY_CODE[code as keyof typeof GRPC_STATUS_BY_CODE];
      return [code, [retriable, status === null ? null : grpcStatusName(status)]];
    }),
  );
  assert.deepEqual(python, expected, "clients/python/sluice_client/errors.py ERROR_CODES vs @sluice/core and @sluice/protocol");
});

it("the Python examples of README.md and docs/ compile, and import only what sluice_client has", () => {
  const pages = ["README.md", ...readdirSync(join(ROOT, "docs"), { recursive: true, encoding: "utf8" }).map((page) => join("docs", page))].filter((page) =>
    page.endsWith(".md"),
  );
  const blocks = pages.flatMap((page) =>
    [...readFileSync(join(ROOT, page), "utf8").matchAll(/```python\n([\s\S]*?)```/g)].map((match) => ({ where: page, source: match[1] ?? "" })),
  );
  assert.ok(blocks.length >= 2, `found ${blocks.length} Python examples; docs/guides/python.md has two`);
  // Each block is compiled whole (a syntax error fails), and its import statements run, so a name the
  // client does not export fails too; the rest needs a controller and the reader's own data.
  const script = [
    "import ast, json, sys",
    "for block in json.load(sys.stdin):",
    "    tree = ast.parse(block['source'], block['where'])",
    "    compile(tree, block['where'], 'exec')",
    "    imports = ast.Module(body=[n for n in tree.body if isinstance(n, (ast.Import, ast.ImportFrom))], type_ignores=[])",
    "    exec(compile(imports, block['where'], 'exec'), {})",
    "print('ok')",
  ].join("\n");
  const run = spawnSync("python3", ["-c", script], { cwd: join(ROOT, "clients/python"), input: JSON.stringify(blocks), encoding: "utf8", timeout: 60_000 });
  assert.equal(run.status, 0, run.stderr);
  assert.equal(run.stdout.trim(), "ok");
});
