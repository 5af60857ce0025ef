import { dynamicSpecJsonSchema, pipelineJsonSchema } from "@sluice/spec";
import type { CommandRegistration } from "../cli.ts";

export const registerSchema: CommandRegistration = (program, cli) => {
  program
    .command("schema")
    .description('print the JSON Schema of pipeline spec files (for editors: reference it as "$schema")')
    .option("--dynamic-spec", "print the schema of a bare dynamic_spec (what `sluice reconfigure` accepts) instead")
    .action((options: { dynamicSpec?: boolean }) => {
      const schema = options.dynamicSpec === true ? dynamicSpecJsonSchema() : pipelineJsonSchema();
      cli.stdout(`${JSON.stringify(schema, null, 2)}\n`);
    });
};
