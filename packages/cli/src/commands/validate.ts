import type { CommandRegistration } from "../cli.ts";

export const registerValidate: CommandRegistration = (program, cli) => {
  program
    .command("validate")
    .description("check a pipeline spec, its cross-references and its modules without starting anything")
    .argument("<spec.json>", "pipeline spec file")
    .action(async (specPath: string) => {
      const { validateAction } = await import("./validate-action.ts");
      await validateAction(cli, specPath);
    });
};
