// services: processes
// heavy: takes two of the end-to-end lane's slots (many processes, a browser or a private broker)
import assert from "node:assert/strict";
import { spawn, type ChildProcess } from "node:child_process";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, before, describe, it } from "node:test";
import { isSluiceError } from "@sluice/core";
import { createGrpcQuotaClient, type QuotaServiceClient } from "@sluice/protocol";
import { BUILT_PACKAGES_FLAGS } from "../../../test/support/processes.ts";
import { repoRoot } from "./run-cli.ts";

// `sluice controller` and `sluice reconfigure` as users run them: real child processes of the bin,
// talking gRPC on loopback. Every wait is bounded; only the children started here are signalled.

const SLUICE = [...BUILT_PACKAGES_FLAGS, "packages/cli/bin/sluice.mjs"];
// A wait, not a bound: a child started on a loaded machine takes over 20 s (it returns at once when it is up).
const STARTUP_MS = 120_000;

interface Finished {
  readonly code: number | null;
  readonly stdout: string;
  readonly stderr: string;
}

/** A running `sluice …` child whose output is collected as it comes. */
class Child {
  readonly process: ChildProcess;
  stdout = "";
  stderr = "";
  readonly exited: Promise<Finished>;

  constructor(args: readonly string[], env: NodeJS.ProcessEnv = {}) {
    this.process = spawn(process.execPath, [...SLUICE, ...args], {
      cwd: repoRoot,
      env: { ...process.env, SLUICE_CONTROLLER_TOKEN: "", ...env },
      stdio: ["ignore", "pipe", "pipe"],
    });
    this.process.stdout?.setEncoding("utf8").on("data", (chunk: string) => (this.stdout += chunk));
    this.process.stderr?.setEncoding("utf8").on("data", (chunk: string) => (this.stderr += chunk));
    this.exited = new Promise((resolve) => this.process.on("close", (code) => resolve({ code, stdout: this.stdout, stderr: this.stderr })));
  }

  /** Resolves with the first match of `pattern` in stdout; fails after `ms`. */
  async waitFor(pattern: RegExp, ms = STARTUP_MS): Promise<RegExpExecArray> {
    const end = Date.now() + ms;
    for (;;) {
      const match = pattern.exec(this.stdout);
      if (match) return match;
      if (this.process.exitCode !== null || Date.now() > end) {
        assert.fail(`no ${pattern} in stdout (exit ${this.process.exitCode}):\n${this.stdout}\nstderr:\n${this.stderr}`);
      }
      await new Promise((resolve) => setTimeout(resolve, 25));
    }
  }

  /** Bounded wait for the exit; kills the child if it overstays. */
  async finished(ms = STARTUP_MS): Promise<Finished> {
    let timer: NodeJS.Timeout | undefined;
    const overstayed = new Promise<never>((_, reject) => {
      timer = setTimeout(() => {
        this.process.kill("SIGKILL");
        reject(new Error(`sluice did not exit within ${ms} ms\nstdout:\n${this.stdout}\nstderr:\n${this.stderr}`));
      }, ms);
    });
    try {
      return await Promise.race([this.exited, overstayed]);
    } finally {
      clearTimeout(timer);
    }
  }

  kill(): void {
    if (this.process.exitCode === null && this.process.signalCode === null) this.process.kill("SIGKILL");
  }
}

const sluice = (...args: string[]) => new Child(args).finished();

describe("sluice controller + sluice reconfigure", { timeout: 120_000 }, () => {
  let dir = "";
  const children: Child[] = [];
  const start = (args: string[], env?: NodeJS.ProcessEnv) => {
    const child = new Child(args, env);
    children.push(child);
    return child;
  };

  before(() => {
    dir = mkdtempSync(join(tmpdir(), "sluice-controller-"));
    writeFileSync(join(dir, "package.json"), JSON.stringify({ type: "module" }));
    // What defineComputation returns, without importing the runtime into the temp dir.
    writeFileSync(join(dir, "enricher.ts"), 'export default { [Symbol.for("sluice.computation")]: true };\n');
    writeFileSync(
      join(dir, "pipeline.json"),
      JSON.stringify({
        pipeline: "cli-test",
        streams: { in: { topic: "in" } },
        computations: { Enricher: { module: "./enricher.ts", inputs: ["in"] } },
        dynamic_spec: {
          throttlers: { api: { limit: 5, period: "1s" }, frozen: { limit: 0 } },
          computations: { Enricher: { input_rows_throttler_id: "api" } },
        },
      }),
    );
    writeFileSync(join(dir, "raised.json"), JSON.stringify({ throttlers: { api: { limit: 50, period: "1s" }, frozen: { limit: 0 } } }));
    writeFileSync(join(dir, "invalid.json"), JSON.stringify({ throttlers: { api: { limit: -5, perod: "1s" } } }));
    writeFileSync(join(dir, "undeclared.json"), JSON.stringify({ throttlers: { api: { limit: 5 } }, computations: { Nobody: {} } }));
    writeFileSync(
      join(dir, "bad-pipeline.json"),
      JSON.stringify({
        pipeline: "cli-test",
        streams: { in: { topic: "in" } },
        computations: { Enricher: { module: "./enricher.ts", inputs: ["in"] } },
        dynamic_spec: {
          throttlers: { api: { limit: 5, classes: { default: { weight: 2 } } } },
          computations: { Enricher: { input_rows_throttler_id: "apy" } },
        },
      }),
    );
  });

  after(() => {
    for (const child of children) child.kill();
    rmSync(dir, { recursive: true, force: true });
  });

  it("serves, reconfigures live, refuses bad updates, and shuts down gracefully on SIGTERM", async () => {
    const controller = start(["controller", join(dir, "pipeline.json"), "--port", "0"]);
    const [line, portText] = await controller.waitFor(/^sluice controller: .* listening on 127\.0\.0\.1:(\d+) .*$/m);
    const address = `127.0.0.1:${portText}`;
    assert.equal(line, `sluice controller: pipeline "cli-test" listening on ${address} (2 throttlers: api=5/s, frozen=0/s)`);

    const client: QuotaServiceClient = createGrpcQuotaClient(address);
    try {
      const request = (throttlerId: string, requestId: string) =>
        client.requestQuota({ throttlerId, clientId: "cli-test", amount: 1, timestampMs: 0, quotaClassId: "", requestId });
      assert.deepEqual(await request("api", "first"), { granted: 1, waitedMs: 0 });

      const raised = await sluice("reconfigure", join(dir, "raised.json"), "--controller", address);
      assert.equal(raised.code, 0, raised.stderr);
      assert.equal(raised.stdout, `dynamic_spec version 2 applied on ${address}\n`);
      const snapshot = JSON.parse((await client.describeThrottlers()).snapshotJson) as { version: number; throttlers: { id: string; limit: number }[] };
      assert.equal(snapshot.version, 2);
      assert.equal(snapshot.throttlers.find((t) => t.id === "api")?.limit, 50);
      await controller.waitFor(/^sluice controller: dynamic_spec version 2 applied: 2 throttlers \(api=50\/s, frozen=0\/s\); changed api$/m, 5_000);

      const invalid = await sluice("reconfigure", join(dir, "invalid.json"), "--controller", address);
      assert.equal(invalid.code, 1);
      assert.match(invalid.stderr, /^✗ dynamic_spec\.throttlers\.api\.limit: .*-5$/m);
      assert.match(invalid.stderr, /^✗ dynamic_spec\.throttlers\.api\.perod: unknown key "perod"; did you mean "period"\?$/m);
      assert.match(invalid.stderr, /2 issues in .*invalid\.json; nothing was sent/);

      // Only the controller knows the pipeline's computations: its refusal is printed the same way.
      const undeclared = await sluice("reconfigure", join(dir, "undeclared.json"), "--controller", address);
      assert.equal(undeclared.code, 1);
      assert.match(undeclared.stderr, /^✗ dynamic_spec\.computations\.Nobody: computation "Nobody" is not declared/m);
      assert.match(undeclared.stderr, /refused the dynamic_spec \(1 issue\); nothing changed/);
      assert.equal((JSON.parse((await client.describeThrottlers()).snapshotJson) as { version: number }).version, 2);

      const nowhere = await sluice("reconfigure", join(dir, "raised.json"), "--controller", "127.0.0.1:1");
      assert.equal(nowhere.code, 1);
      assert.match(nowhere.stderr, /127\.0\.0\.1:1 is unreachable for UpdateDynamicSpec/);

      // A request waits on a throttler at limit 0 when the controller is told to stop.
      const waiting = request("frozen", "stuck");
      const until = Date.now() + 5_000;
      for (;;) {
        const described = JSON.parse((await client.describeThrottlers()).snapshotJson) as { throttlers: { id: string; pendingRequests: number }[] };
        if (described.throttlers.find((t) => t.id === "frozen")?.pendingRequests === 1) break;
        assert.ok(Date.now() < until, "the request never queued");
        await new Promise((resolve) => setTimeout(resolve, 25));
      }
      controller.process.kill("SIGTERM");
      await assert.rejects(waiting, (error: unknown) => {
        assert.ok(isSluiceError(error, "CONTROLLER_UNAVAILABLE"), String(error));
        assert.match(error.message, /the controller is shutting down; retry against the restarted controller/);
        return true;
      });
      const exit = await controller.finished(10_000);
      assert.equal(exit.code, 0, exit.stderr);
      assert.match(exit.stdout, /^sluice controller: SIGTERM: shutting down/m);
      assert.match(exit.stdout, /^sluice controller: stopped$/m);
    } finally {
      client.close();
    }
  });

  it("requires the token from SLUICE_CONTROLLER_TOKEN or --token", async () => {
    const controller = start(["controller", join(dir, "pipeline.json"), "--port", "0"], { SLUICE_CONTROLLER_TOKEN: "s3cret" });
    const [, portText] = await controller.waitFor(/listening on 127\.0\.0\.1:(\d+) .*, token required$/m);
    const address = `127.0.0.1:${portText}`;
    const anonymous = createGrpcQuotaClient(address);
    try {
      await assert.rejects(anonymous.describeThrottlers(), (error: unknown) => isSluiceError(error, "UNAUTHENTICATED"));
    } finally {
      anonymous.close();
    }
    const refused = await sluice("reconfigure", join(dir, "raised.json"), "--controller", address);
    assert.equal(refused.code, 1);
    assert.match(refused.stderr, /UNAUTHENTICATED: this controller requires a token/);
    const accepted = await sluice("reconfigure", join(dir, "raised.json"), "--controller", address, "--token", "s3cret");
    assert.equal(accepted.code, 0, accepted.stderr);
    controller.process.kill("SIGINT");
    assert.equal((await controller.finished(10_000)).code, 0);
  });

  it("loads an adaptive throttler's TypeScript load module when the spec names no other module", async () => {
    // The bin registers tsx only before a module the spec names is imported: here the only one is
    // the load module, read by the controller's adaptive loop.
    writeFileSync(join(dir, "load.ts"), "const load: number = 0.95;\nexport default (): number => load;\n");
    writeFileSync(
      join(dir, "adaptive.json"),
      JSON.stringify({
        pipeline: "cli-adaptive",
        streams: {},
        computations: {},
        dynamic_spec: {
          throttlers: {
            cores: {
              kind: "concurrency",
              adaptive: { load: { module: "./load.ts" }, target: { low: 0.6, high: 0.8 }, initial_limit: 4, min_limit: 2, max_limit: 20, interval: "1s" },
            },
          },
        },
      }),
    );
    const controller = start(["controller", join(dir, "adaptive.json"), "--port", "0"]);
    await controller.waitFor(/^sluice controller: .* listening on 127\.0\.0\.1:\d+/m);
    // A load of 0.95 is over the band: the first reading that arrives cuts the limit (on a loaded
    // machine the first may come late while tsx registers, and is then held over).
    await controller.waitFor(/adaptive cores: cut limit 4 -> \d+: load 0\.95/, 60_000);
    controller.process.kill("SIGINT");
    assert.equal((await controller.finished(10_000)).code, 0);
  });

  it("refuses to start on an invalid spec, printing every issue", async () => {
    const run = await sluice("controller", join(dir, "bad-pipeline.json"), "--port", "0");
    assert.equal(run.code, 1);
    assert.equal(run.stdout, "");
    assert.match(run.stderr, /^✗ dynamic_spec\.computations\.Enricher\.input_rows_throttler_id: .*"apy"/m);
    assert.match(run.stderr, /^✗ dynamic_spec\.throttlers\.api\.classes\.default: .*reserved/m);
    assert.match(run.stderr, /not started, 2 issues in .*bad-pipeline\.json/);
  });
});
