import type { CommandRegistration } from "../cli.ts";
import { CLIENT_TLS_OPTIONS } from "../command-options.ts";
import { CONTROLLER_TOKEN_ENV } from "./controller.ts";
import type { ReconfigureOptions } from "./reconfigure-action.ts";

export const registerReconfigure: CommandRegistration = (program, cli) => {
  program
    .command("reconfigure")
    .description("replace the dynamic_spec of a running controller (validated here first, then applied atomically)")
    .argument("<file.json>", "a whole pipeline spec or just its dynamic_spec")
    .requiredOption("--controller <host:port>", "address of the controller")
    .option("--token <token>", `controller token (default: $${CONTROLLER_TOKEN_ENV})`)
    .option(...CLIENT_TLS_OPTIONS.ca)
    .option(...CLIENT_TLS_OPTIONS.cert)
    .option(...CLIENT_TLS_OPTIONS.key)
    .option(...CLIENT_TLS_OPTIONS.serverName)
    .action(async (file: string, options: ReconfigureOptions) => {
      const { reconfigureAction } = await import("./reconfigure-action.ts");
      await reconfigureAction(cli, file, options);
    });
};
