// services: processes
// The fault harness's short schedule, as CI runs it (docs/design.md §5.3): `pnpm test:faults` with a fixed
// seed and a 3-minute schedule, which has five faults, one of each kind. Real parts throughout: a
// private broker, three controllers behind Toxiproxy, two client processes. Passes only when the
// checker finds no violation in the whole history and the group recovered from every fault.
import assert from "node:assert/strict";
import { spawn } from "node:child_process";
import { join } from "node:path";
import { describe, it } from "node:test";
import { CHILD_NODE_FLAGS, ROOT } from "../support/processes.ts";
import { FAULT_KINDS } from "./history.ts";

/**
 * A seed whose schedule draws short quiet times and faults (about 46 s of them in all, where the
 * draws range up to 93 s), and the harder variant of the kinds that have two: the leader's
 * connection cut (not a follower's), the broker SIGKILLed (a crash, not a controlled shutdown).
 * Any seed of a 3-minute schedule hits every kind once; the long `pnpm test:faults` runs draw
 * their own.
 */
const SEED = 20354126;

describe("pnpm test:faults, short schedule", { timeout: 20 * 60_000 }, () => {
  it(`seed ${SEED}, 3 minutes: every fault kind once, and every invariant holds over the recorded history`, async (t) => {
    const child = spawn(
      process.execPath,
      ["--import", "tsx", ...CHILD_NODE_FLAGS, join(ROOT, "test/faults/run.ts"), "--seed", String(SEED), "--minutes", "3"],
      {
        cwd: ROOT,
        stdio: ["ignore", "pipe", "pipe"],
      },
    );
    let output = "";
    child.stdout.on("data", (chunk: Buffer) => (output += chunk.toString()));
    child.stderr.on("data", (chunk: Buffer) => (output += chunk.toString()));
    const code = await new Promise<number | null>((resolve) => child.on("exit", (c) => resolve(c)));
    for (const line of output.split("\n").filter((l) => /^(seed|#\d| {4}|[a-z-]+: \d+×|\d+ grants|invariants| {2}\[)/.test(l))) t.diagnostic(line);
    assert.match(output, new RegExp(`^seed ${SEED}$`, "m"), "the seed is printed first");
    for (const kind of FAULT_KINDS) assert.match(output, new RegExp(`^#\\d+ ${kind} on `, "m"), `the schedule hit ${kind}`);
    assert.match(output, /^invariants: all hold/m, `the checker found violations:\n${output.slice(-6000)}`);
    assert.equal(code, 0, `pnpm test:faults exited ${code}:\n${output.slice(-6000)}`);
  });
});
