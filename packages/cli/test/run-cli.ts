import { spawnSync } from "node:child_process";
import { resolve } from "node:path";
import { fileURLToPath } from "node:url";
import { BUILT_PACKAGES_FLAGS } from "../../../test/support/processes.ts";

export const repoRoot = resolve(fileURLToPath(import.meta.url), "../../../..");

export interface CliRun {
  readonly code: number | null;
  readonly stdout: string;
  readonly stderr: string;
}

/** Runs the real `sluice` bin in a child process from the repository root. */
export function runSluice(...args: string[]): CliRun {
  const child = spawnSync(process.execPath, [...BUILT_PACKAGES_FLAGS, "packages/cli/bin/sluice.mjs", ...args], {
    cwd: repoRoot,
    encoding: "utf8",
    timeout: 60_000,
  });
  return { code: child.status, stdout: child.stdout, stderr: child.stderr };
}
