import { Command, CommanderError } from "commander";
import { EXIT_FAILURE, EXIT_OK, EXIT_USAGE, type Cli, type CommandRegistration } from "./cli.ts";
import { registerController } from "./commands/controller.ts";
import { registerInit } from "./commands/init.ts";
import { registerReconfigure } from "./commands/reconfigure.ts";
import { registerRun } from "./commands/run.ts";
import { registerSchema } from "./commands/schema.ts";
import { registerTop } from "./commands/top.ts";
import { registerValidate } from "./commands/validate.ts";
import { registerWorker } from "./commands/worker.ts";

// The `sluice` program. A command is a file in commands/ exporting a CommandRegistration; adding
// one is a line in this list. A registration declares only what commander needs before it parses
// (name, options, help text, parsers) and imports its action (commands/<name>-action.ts) when the
// action runs: every `sluice` start, `--help` included, would otherwise load the controller, Kafka,
// gRPC and OpenTelemetry of every command.
const COMMANDS: readonly CommandRegistration[] = [
  registerRun,
  registerWorker,
  registerController,
  registerReconfigure,
  registerTop,
  registerValidate,
  registerSchema,
  registerInit,
];

export interface MainOutput {
  readonly stdout: (text: string) => void;
  readonly stderr: (text: string) => void;
}

/** What the `sluice` bin provides to the commands. */
export interface MainHooks {
  /**
   * Called before the first module a spec names is imported; the bin registers tsx there, so that
   * `.ts` modules load without a build step.
   */
  readonly beforeSpecModules?: () => Promise<void>;
}

const processOutput: MainOutput = {
  stdout: (text) => process.stdout.write(text),
  stderr: (text) => process.stderr.write(text),
};

/**
 * The `sluice` program with every command registered, not parsed yet. The CLI reference
 * (docs/reference/cli.md) is generated from it.
 */
export function sluiceProgram(cli: Cli): Command {
  // Settings before commands: subcommands copy them when they are created.
  const program = new Command("sluice")
    .description("Stream processing for TypeScript with Flow-like computations and a distributed throttler")
    .exitOverride()
    .configureOutput({ writeOut: cli.stdout, writeErr: cli.stderr })
    .showHelpAfterError("(run `sluice --help` for usage)");
  for (const register of COMMANDS) register(program, cli);
  return program;
}

/** Runs `sluice <argv…>` and resolves with the exit code. */
export async function main(argv: readonly string[], output: MainOutput = processOutput, hooks: MainHooks = {}): Promise<number> {
  let exitCode = EXIT_OK;
  const cli: Cli = { ...output, ...hooks, setExitCode: (code) => (exitCode = code) };

  const program = sluiceProgram(cli);

  try {
    await program.parseAsync([...argv], { from: "user" });
  } catch (error) {
    // Help and version end the parse with exit code 0; every other commander error is a usage error.
    if (error instanceof CommanderError) return error.exitCode === 0 ? EXIT_OK : EXIT_USAGE;
    output.stderr(`sluice: ${error instanceof Error ? (error.stack ?? error.message) : String(error)}\n`);
    return EXIT_FAILURE;
  }
  return exitCode;
}
