// services: processes
// heavy: runs the whole benchmark suite, its nine groups side by side, which loads both cores by itself
// Keeps the benchmark suite working: `pnpm bench --quick` as a child process, results to a temp
// file. That it runs and reports every group is checked, and that Sluice's grant counts are
// positive — never how fast anything was, so a slow or busy machine cannot fail it. The quick Kafka
// measurements use the broker the test command started (KAFKA_BROKERS), or start one themselves
// through scripts/kafka.mjs.
import assert from "node:assert/strict";
import { spawn } from "node:child_process";
import { existsSync, mkdtempSync, readFileSync, statSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { describe, it } from "node:test";
import { CHILD_NODE_FLAGS, ROOT } from "../support/processes.ts";

interface Results {
  mode: string;
  machine: { nproc: number; cpuModel: string; node: string };
  groups: { id: string; status: string; messages: string[]; figures: { id: string; sluice: { median: number; runs: number[] } | null }[] }[];
}

const GROUPS = ["local", "controller", "runtime", "accuracy", "scale", "delivery", "smooth", "stream", "keys"];

/**
 * Sluice's grant counts: a Sluice that grants nothing must fail the smoke, whatever else ran. Quick
 * mode's windows open once every load process has had a grant and close once each has counted one,
 * so each is positive on any machine, however busy; how large is never checked.
 */
const GRANT_COUNTS = [
  "controller.rpc.throughput.1",
  "controller.rpc.throughput.16",
  "controller.rpc.throughput.256",
  "stream.rpc.throughput.16",
  "stream.rpc.throughput.256",
  "scale.throttlers.throughput",
  "smooth.utilisation",
  "smooth.max_in_period",
  "smooth.seed.utilisation",
  "smooth.seed.max_in_period",
  "keys.rpc.throughput",
];

describe("benchmark suite", () => {
  // The timeout only catches a hang: the quick run is meant to take well under a minute, but its
  // dozens of child processes on a loaded 2-core machine can take several.
  it("pnpm bench --quick runs every group to completion and writes their figures to --out", { timeout: 900_000 }, async () => {
    const out = join(mkdtempSync(join(tmpdir(), "sluice-bench-")), "results.json");
    const committed = join(ROOT, "bench/results.json");
    const committedBefore = existsSync(committed) ? statSync(committed).mtimeMs : null;
    const child = spawn(process.execPath, ["--import", "tsx", ...CHILD_NODE_FLAGS, join(ROOT, "bench/run.ts"), "--quick", "--out", out], {
      cwd: ROOT,
      env: process.env,
      stdio: ["ignore", "pipe", "pipe"],
    });
    let output = "";
    child.stdout.on("data", (chunk: Buffer) => (output += chunk.toString()));
    child.stderr.on("data", (chunk: Buffer) => (output += chunk.toString()));
    const code = await new Promise<number | null>((resolve) => child.on("exit", (exitCode) => resolve(exitCode)));
    assert.equal(code, 0, `bench --quick exited ${code}:\n${output.slice(-6000)}`);
    assert.ok(existsSync(out), `no results at ${out}`);
    assert.equal(existsSync(committed) ? statSync(committed).mtimeMs : null, committedBefore, "--out must leave bench/results.json alone");

    const results = JSON.parse(readFileSync(out, "utf8")) as Results;
    assert.equal(results.mode, "quick");
    assert.ok(results.machine.nproc > 0 && results.machine.node.startsWith("v") && results.machine.cpuModel.length > 0);
    assert.deepEqual(
      results.groups.map((group) => group.id),
      GROUPS,
    );
    for (const group of results.groups) {
      assert.notEqual(group.status, "failed", `group ${group.id} failed: ${group.messages.join("\n")}`);
      assert.ok(group.figures.length > 0, `group ${group.id} has no figures`);
      for (const figure of group.figures) {
        assert.ok(figure.sluice === null || figure.sluice.runs.length >= 1, `${figure.id} has no runs`);
      }
    }
    const figures = new Map(results.groups.flatMap((group) => group.figures.map((figure) => [figure.id, figure] as const)));
    for (const id of GRANT_COUNTS) {
      const runs = figures.get(id)?.sluice?.runs ?? [];
      assert.ok(
        runs.length > 0 && runs.every((value) => Number.isFinite(value) && value > 0),
        `${id}: Sluice's runs ${JSON.stringify(runs)}, not all positive and finite`,
      );
    }
    const runtime = results.groups.find((group) => group.id === "runtime");
    const kafkaMeasured = runtime?.figures.some((figure) => figure.id === "runtime.kafka.grpc") ?? false;
    // A skipped Kafka half must say so in the results, never silently.
    assert.ok(kafkaMeasured || runtime?.messages.some((message) => message.includes("SKIPPED")), "the Kafka figures are neither there nor reported as skipped");
    for (const title of [
      "Local hot path",
      "Controller",
      "Runtime overhead",
      "Accuracy",
      "Scale",
      "Delivery",
      "Shaping",
      "QuotaStream",
      "Keyed throttlers",
      "Goals",
    ])
      assert.match(output, new RegExp(title));
  });
});
