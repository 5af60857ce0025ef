export { main, type MainHooks, type MainOutput } from "./main.ts";
export { loadPipelineSpec, type LoadedSpec, type LoadSpecOptions } from "./load-spec.ts";
export type { Cli, CommandRegistration } from "./cli.ts";
