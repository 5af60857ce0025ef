import type { Command } from "commander";

// What a command gets besides its arguments: where to write, and how to report its exit code
// (commander discards an action's return value). Tests pass their own writers.

export interface Cli {
  readonly stdout: (text: string) => void;
  readonly stderr: (text: string) => void;
  /** The process exit code once the command returns: 0 success, 1 failure (2 is commander's usage errors). */
  setExitCode(code: number): void;
  /**
   * Called before a module the spec names (computations, generators, adaptive load modules) is imported: the
   * `sluice` bin registers tsx there, so that `.ts` modules load without a build step. Absent when the
   * caller has already made them loadable (tests run under `node --import tsx`).
   */
  readonly beforeSpecModules?: () => Promise<void>;
}

/** Adds one subcommand to the `sluice` program; see the list in main.ts. */
export type CommandRegistration = (program: Command, cli: Cli) => void;

export const EXIT_OK = 0;
export const EXIT_FAILURE = 1;
export const EXIT_USAGE = 2;
