import { EXIT_FAILURE, EXIT_OK, EXIT_USAGE } from "../../packages/cli/src/cli.ts";
import { sluiceProgram } from "../../packages/cli/src/main.ts";
import { code, page, table } from "./markdown.ts";

// docs/reference/cli.md from commander's own definitions of the `sluice` program: each command's
// usage, description, arguments and options as `--help` shows them (commander's Help decides what
// is visible and how a flag is spelt).

/** commander's Command, named through the CLI (commander is the CLI package's dependency, not the root's). */
type Command = ReturnType<typeof sluiceProgram>;

function program(): Command {
  const ignore = () => undefined;
  return sluiceProgram({ stdout: ignore, stderr: ignore, setExitCode: ignore });
}

function defaultOf(value: unknown, description: string | undefined): string {
  if (description !== undefined && description !== "") return description;
  if (value === undefined) return "";
  return JSON.stringify(value) ?? "";
}

function commandSection(command: Command, path: string): string[] {
  const help = command.createHelp();
  const args = help.visibleArguments(command);
  const options = help.visibleOptions(command);
  const blocks = [`## \`${path}\``, command.description(), "```\n" + `${path} ${command.usage()}`.trim() + "\n```"];
  if (args.length > 0) {
    blocks.push(
      table(
        ["argument", "required", "description"],
        args.map((a) => [code(help.argumentTerm(a)), a.required ? "yes" : "", a.description]),
      ),
    );
  }
  if (options.length > 0) {
    blocks.push(
      table(
        ["option", "default", "environment", "description"],
        options.map((o) => [
          code(o.flags),
          defaultOf(o.defaultValue, o.defaultValueDescription),
          o.envVar ? code(o.envVar) : "",
          [o.description, o.argChoices ? `Choices: ${o.argChoices.join(", ")}.` : "", o.mandatory ? "Required." : ""].filter((t) => t !== "").join(" "),
        ]),
      ),
    );
  }
  const subcommands = help.visibleCommands(command).filter((c) => c.name() !== "help");
  return [...blocks, ...subcommands.flatMap((c) => commandSection(c, `${path} ${c.name()}`))];
}

export function cliReferencePage(): string {
  const sluice = program();
  const commands = sluice
    .createHelp()
    .visibleCommands(sluice)
    .filter((c) => c.name() !== "help");
  return page("CLI reference", [
    [
      `\`sluice\`: ${sluice.description()}. Every command prints this with \`sluice <command> --help\`.`,
      `Exit codes: ${EXIT_OK} success, ${EXIT_FAILURE} failure, ${EXIT_USAGE} a usage error (an unknown option, a missing argument).`,
    ].join("\n"),
    table(
      ["command", "what it does"],
      commands.map((c) => [`[${code(`sluice ${c.name()}`)}](#sluice-${c.name()})`, c.description()]),
    ),
    ...commands.flatMap((c) => commandSection(c, `sluice ${c.name()}`)),
  ]);
}
