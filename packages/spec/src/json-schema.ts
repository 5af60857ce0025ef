import * as z from "zod";
import { dynamicSpecSchema } from "./dynamic-spec.ts";
import { pipelineSpecSchema } from "./pipeline-spec.ts";

// JSON Schema of what a user writes (the input side: durations as string-or-integer, defaults shown
// in their JSON spelling). Cross-references are not expressible in JSON Schema; `sluice validate`
// checks them.

export function pipelineJsonSchema(): Record<string, unknown> {
  return { ...z.toJSONSchema(pipelineSpecSchema, { io: "input" }), title: "Sluice pipeline spec" };
}

export function dynamicSpecJsonSchema(): Record<string, unknown> {
  return { ...z.toJSONSchema(dynamicSpecSchema, { io: "input" }), title: "Sluice dynamic_spec" };
}
