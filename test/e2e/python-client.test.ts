// services: processes, python
// clients/python's tests (python3 -m pytest) against a real `sluice controller` child started here,
// with a token, on a free port; the throttlers they use are declared below. `.ci/run` installs
// clients/python/requirements-dev.txt (grpcio, grpcio-tools, pytest).
import assert from "node:assert/strict";
import { spawn, spawnSync } from "node:child_process";
import { join } from "node:path";
import { after, it } from "node:test";
import { ERROR_CODES } from "@sluice/core";
import { GRPC_STATUS_BY_CODE, grpcStatusName } from "@sluice/protocol";
import { Child, NOOP_COMPUTATION, ROOT, sluice, writeSpec } from "../support/processes.ts";

const children: Child[] = [];
after(() => {
  for (const child of children) child.kill("SIGKILL");
});

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
    spawn("python3", ["-m", "pytest", "-q", "-p", "no:cacheprovider", "tests"], {
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
