import assert from "node:assert/strict";
import { spawn, type ChildProcess } from "node:child_process";
import { existsSync, mkdtempSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join, resolve } from "node:path";
import { fileURLToPath } from "node:url";

export const ROOT = resolve(dirname(fileURLToPath(import.meta.url)), "../..");
export const SLUICE_BIN = join(ROOT, "packages/cli/bin/sluice.mjs");
export const NOOP_COMPUTATION = join(ROOT, "test/fixtures/noop-computation.ts");

const BUILT = process.env["SLUICE_E2E_BUILT"] === "1";

/**
 * Node flags for any child a test starts: when the test runner has built the packages
 * (SLUICE_E2E_BUILT=1, set by `pnpm test:e2e` after `pnpm build`), the children load their compiled
 * dist/ rather than compiling the TypeScript sources through tsx on every start. A test file run on
 * its own (`node --import tsx --test …`) starts them on the sources. The module hooks also redirect
 * a `packages/<pkg>/src/…` path to dist/; a child that names packages only by name (the `sluice`
 * bin, test/fixtures) needs just {@link BUILT_PACKAGES_FLAGS}.
 */
export const CHILD_NODE_FLAGS: readonly string[] = BUILT ? ["--import", join(ROOT, "test/support/use-built-packages.mjs")] : [];

/**
 * Node flags for a child that imports the workspace packages only by name, such as `sluice`: every
 * package's "exports" maps the `sluice-built` condition to its dist/. Unlike CHILD_NODE_FLAGS this
 * needs no module hooks, whose thread answers every import of the child and costs a good part of
 * its start's CPU.
 */
export const BUILT_PACKAGES_FLAGS: readonly string[] = BUILT ? ["--conditions=sluice-built"] : [];

function checkBuilt(): void {
  const main = join(ROOT, "packages/cli/dist/main.js");
  if (BUILT && !existsSync(main)) throw new Error(`${main} does not exist: run \`pnpm build\` (the end-to-end lane runs it first), or unset SLUICE_E2E_BUILT`);
}

/** Writes a spec into a fresh temp dir and returns its path. */
export function writeSpec(spec: unknown): string {
  const dir = mkdtempSync(join(tmpdir(), "sluice-test-"));
  const path = join(dir, "pipeline.json");
  writeFileSync(path, JSON.stringify(spec, null, 2));
  return path;
}

/** Collects a child's output and lets a test wait for a line matching a pattern. */
export class Child {
  stdout = "";
  stderr = "";
  readonly exited: Promise<{ code: number | null; signal: NodeJS.Signals | null }>;

  constructor(readonly process: ChildProcess) {
    process.stdout?.on("data", (chunk: Buffer) => (this.stdout += chunk.toString()));
    process.stderr?.on("data", (chunk: Buffer) => (this.stderr += chunk.toString()));
    this.exited = new Promise((done) => process.on("exit", (code, signal) => done({ code, signal })));
  }

  get pid(): number {
    return this.process.pid ?? -1;
  }

  /**
   * The default wait is long because a child takes seconds to start on a loaded machine (over 20 s
   * from TypeScript sources at a load average of 20; over 60 s, from dist/ too, at 30); a child that
   * exits stops the wait at once, so a broken start still fails fast.
   */
  async waitFor(pattern: RegExp, timeoutMs = 120_000, stream: "stdout" | "stderr" = "stdout"): Promise<RegExpMatchArray> {
    const deadline = Date.now() + timeoutMs;
    for (;;) {
      const match = this[stream].match(pattern);
      if (match) return match;
      if (this.process.exitCode !== null || Date.now() > deadline) {
        throw new Error(`no ${pattern} in output after ${timeoutMs} ms (exit ${this.process.exitCode})\nstdout:\n${this.stdout}\nstderr:\n${this.stderr}`);
      }
      await new Promise((r) => setTimeout(r, 20));
    }
  }

  /** Writes one line to the child's stdin (a child started with a stdin pipe: tsNode). */
  send(line: string): void {
    this.process.stdin?.write(`${line}\n`);
  }

  /** Sends a signal to this child only (by its own pid). */
  kill(signal: NodeJS.Signals = "SIGTERM"): void {
    if (this.running) this.process.kill(signal);
  }

  get running(): boolean {
    return this.process.exitCode === null && this.process.signalCode === null;
  }

  /**
   * Ends this child by its own pid, and never waits for ever: SIGTERM (after SIGCONT, in case a test
   * stopped it), SIGKILL once `graceMs` has passed without an exit (at once with 0), then at most
   * KILL_WAIT_MS more. Resolves its exit, or null when it still had not exited by then (a process
   * stuck in the kernel must not hold a test file's cleanup).
   */
  async stop(graceMs = 5_000): Promise<{ code: number | null; signal: NodeJS.Signals | null } | null> {
    if (!this.running) return this.exited;
    if (graceMs > 0) {
      this.kill("SIGCONT");
      this.kill("SIGTERM");
      const ended = await within(this.exited, graceMs);
      if (ended !== null) return ended;
    }
    this.kill("SIGKILL");
    return within(this.exited, KILL_WAIT_MS);
  }
}

/** How long a stop waits for a SIGKILLed child to be gone. */
const KILL_WAIT_MS = 5_000;

/** `promise`'s value, or null once `ms` have passed (the timer does not hold the process). */
async function within<T>(promise: Promise<T>, ms: number): Promise<T | null> {
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<null>((resolve) => {
    timer = setTimeout(() => resolve(null), ms);
    timer.unref();
  });
  try {
    return await Promise.race([promise, timeout]);
  } finally {
    clearTimeout(timer);
  }
}

/** Stops every child at once (Child.stop): for after hooks, bounded by `graceMs` + 5 s whatever the children do. */
export async function stopAll(children: readonly Child[], graceMs = 5_000): Promise<void> {
  await Promise.all(children.map((child) => child.stop(graceMs)));
}

export function sluice(args: readonly string[], env: NodeJS.ProcessEnv = {}): Child {
  checkBuilt();
  return new Child(
    spawn(process.execPath, [...BUILT_PACKAGES_FLAGS, SLUICE_BIN, ...args], { cwd: ROOT, env: { ...process.env, ...env }, stdio: ["ignore", "pipe", "pipe"] }),
  );
}

/** Runs a TypeScript script that imports the workspace packages by name (test/fixtures). */
export function tsNode(script: string, args: readonly string[]): Child {
  checkBuilt();
  return new Child(
    spawn(process.execPath, ["--import", "tsx", ...BUILT_PACKAGES_FLAGS, join(ROOT, script), ...args], { cwd: ROOT, stdio: ["pipe", "pipe", "pipe"] }),
  );
}

/** Starts `sluice controller` on the spec (port 0 = any) and resolves with its port. */
export async function startController(specPath: string, port = 0): Promise<{ child: Child; port: number; address: string }> {
  const child = sluice(["controller", specPath, "--port", String(port)]);
  let match: RegExpMatchArray;
  try {
    match = await child.waitFor(/listening on 127\.0\.0\.1:(\d+)/);
  } catch (error) {
    // The caller never gets the child to end: a controller that did not start in time ends here.
    child.kill("SIGKILL");
    throw error;
  }
  const actual = Number(match[1]);
  return { child, port: actual, address: `127.0.0.1:${actual}` };
}

/** The child's exit code; fails the test, with the child's output, when it has not exited within `timeoutMs`. */
export async function exitCodeWithin(child: Child, timeoutMs: number): Promise<number | null> {
  const timer = new Promise<"timeout">((resolve) => setTimeout(() => resolve("timeout"), timeoutMs).unref());
  const result = await Promise.race([child.exited, timer]);
  assert.notEqual(result, "timeout", `the process did not exit within ${timeoutMs} ms\nstdout:\n${child.stdout}\nstderr:\n${child.stderr}`);
  return result === "timeout" ? null : result.code;
}
