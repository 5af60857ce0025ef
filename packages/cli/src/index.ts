export { main, type MainOutput } from "./main.ts";
export { loadPipelineSpec, type LoadedSpec } from "./load-spec.ts";
export type { Cli, CommandRegistration } from "./cli.ts";
