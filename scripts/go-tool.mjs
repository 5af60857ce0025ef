// Building a Go tool of this repository (tools/<name>/go.mod + go.sum, e.g. Jaeger, Toxiproxy) into
// .tools/bin once: `go build` from the Go module proxy, stamped with what it was built from so that
// a change of go.mod, go.sum or the build command rebuilds it, under a cross-process lock so that
// two callers (`node scripts/jaeger.mjs build &` in .ci/run and a test) never build at once.
// Shared by scripts/jaeger.mjs and scripts/toxiproxy.mjs. Plain Node ESM, no dependencies.
import { spawn } from "node:child_process";
import { createHash } from "node:crypto";
import { accessSync, closeSync, constants, mkdirSync, openSync, readFileSync, renameSync, rmSync, statSync, writeFileSync } from "node:fs";
import { dirname } from "node:path";
import { commandLine, indent, tailOfFile, withDirLock } from "./local-process.mjs";

const secs = (ms) => (ms / 1000).toFixed(1);

/**
 * @param {{ what: string, toolDir: string, goModFile: string, goSumFile: string, binFile: string,
 *   stampFile: string, buildLogFile: string, buildLockDir: string, lockWaitMs: number,
 *   pkg: string, ldflags: () => string, version: () => string, firstBuildNote: string,
 *   fail: (message: string) => Error, say: (line: string) => void, rel: (p: string) => string }} tool
 * @returns {{ build(): Promise<{ built: boolean, ms: number }>, isBuilt(): boolean, goDirective(): string }}
 */
export function goTool(tool) {
  const { what, toolDir, goModFile, goSumFile, binFile, stampFile, buildLogFile, fail, say, rel } = tool;
  const buildArgs = (output) => [
    "build",
    "-mod=readonly", // exactly the tool's go.mod + go.sum, whatever GOFLAGS says
    "-trimpath",
    "-p",
    "2",
    // -s -w: no symbol table / DWARF (stack traces keep names and lines); -X: the version it prints
    "-ldflags",
    tool.ldflags(),
    "-o",
    output,
    tool.pkg,
  ];
  const goDirective = () => /^go\s+(\S+)/m.exec(readFileSync(goModFile, "utf8"))?.[1] ?? "";
  /** The log's last lines; Go's download chatter would hide the error. */
  const tailOfLog = (file) => tailOfFile(file, { drop: /^go: (downloading|finding|extracting) / });

  /** What the binary was built from: go.mod, go.sum and the build command. */
  function buildStamp() {
    const hash = createHash("sha256");
    hash.update(readFileSync(goModFile));
    hash.update("\0");
    hash.update(readFileSync(goSumFile));
    hash.update("\0");
    hash.update(JSON.stringify(buildArgs("BIN")));
    return hash.digest("hex");
  }

  function isBuilt() {
    try {
      accessSync(binFile, constants.X_OK);
      return readFileSync(stampFile, "utf8").trim() === buildStamp();
    } catch {
      return false;
    }
  }

  async function runGoBuild() {
    mkdirSync(dirname(binFile), { recursive: true });
    mkdirSync(dirname(buildLogFile), { recursive: true });
    const stamp = buildStamp();
    const tmp = `${binFile}.tmp-${process.pid}`;
    const go = process.env.GO || "go";
    const args = buildArgs(tmp);
    say(`building ${what} ${tool.version()} into ${rel(binFile)} (go build in ${rel(toolDir)}; ${tool.firstBuildNote}; log ${rel(buildLogFile)})`);
    const out = openSync(buildLogFile, "w");
    writeFileSync(out, `$ (cd ${toolDir} && CGO_ENABLED=0 ${commandLine(go, args)})\n`);
    let child;
    try {
      child = spawn(go, args, { cwd: toolDir, env: { ...process.env, CGO_ENABLED: "0" }, stdio: ["ignore", out, out] });
    } finally {
      closeSync(out);
    }
    // Interrupted: end the go build (our child) and let the lock and the temporary file be cleaned up.
    let interrupted;
    const onSignal = (signal) => {
      interrupted = signal;
      try {
        child.kill("SIGINT");
      } catch {
        // already gone
      }
    };
    const signals = ["SIGINT", "SIGTERM", "SIGHUP"];
    for (const s of signals) process.on(s, onSignal);
    const t0 = Date.now();
    const result = await new Promise((done) => {
      child.once("error", (err) => done({ err }));
      child.once("exit", (code, signal) => done({ code, signal }));
    });
    for (const s of signals) process.removeListener(s, onSignal);
    const line = `(cd ${rel(toolDir)} && CGO_ENABLED=0 ${commandLine(go, buildArgs(rel(binFile)))})`;
    if (result.err || result.code !== 0 || interrupted) {
      rmSync(tmp, { force: true });
      if (interrupted) throw fail(`building ${what} was interrupted (${interrupted})`);
      if (result.err) {
        const hint = result.err.code === "ENOENT" ? ` (is Go ${goDirective()} or newer installed and on PATH? set GO to use another go)` : "";
        throw fail(`building ${what} failed: cannot run ${go}: ${result.err.message}${hint}\n  command: ${line}`);
      }
      throw fail(
        `building ${what} failed (exit ${result.code ?? result.signal} after ${secs(Date.now() - t0)} s)\n  command: ${line}\n` +
          `  log ${rel(buildLogFile)}, last 40 lines:\n${indent(tailOfLog(buildLogFile))}`,
      );
    }
    renameSync(tmp, binFile);
    writeFileSync(stampFile, `${stamp}\n`);
    say(`built ${rel(binFile)} in ${secs(Date.now() - t0)} s (${(statSync(binFile).size / 1e6).toFixed(0)} MB)`);
  }

  /** Builds the binary unless the one for this go.mod/go.sum is there; waits for a build in progress. */
  async function build() {
    if (isBuilt()) return { built: false, ms: 0 };
    return withDirLock(tool.buildLockDir, { maxWaitMs: tool.lockWaitMs, pollMs: 250, fail, describe: rel }, async () => {
      if (isBuilt()) return { built: false, ms: 0 }; // another process built it while we waited
      const t0 = Date.now();
      await runGoBuild();
      return { built: true, ms: Date.now() - t0 };
    });
  }

  return { build, isBuilt, goDirective };
}
