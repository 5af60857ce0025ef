import { join } from "node:path";
import { CHILDREN_DIR } from "./paths.ts";

export const NOOP_COMPUTATION = join(CHILDREN_DIR, "noop-computation.ts");

/**
 * A pipeline spec for a controller process: memory streams, one no-op computation per entry of
 * `computations` (their dynamic_spec entries name throttlers and classes), and the throttlers.
 */
export function controllerSpec(
  throttlers: Readonly<Record<string, unknown>>,
  computations: Readonly<Record<string, Readonly<Record<string, string>>>> = {},
): Record<string, unknown> {
  const names = ["Bench", ...Object.keys(computations)];
  return {
    pipeline: "bench",
    streams: { input: { topic: "input" } },
    computations: Object.fromEntries(names.map((name) => [name, { module: NOOP_COMPUTATION, inputs: ["input"] }])),
    dynamic_spec: { throttlers, computations },
  };
}
