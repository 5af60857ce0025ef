import { cliReferencePage } from "./cli-reference.ts";
import { errorsReferencePage } from "./errors-reference.ts";
import { metricsReferencePage } from "./metrics-reference.ts";
import { specReferencePage } from "./spec-reference.ts";

/** The command that rewrites every generated reference page. */
export const REGENERATE_COMMAND = "pnpm docs:reference";

/** Every generated page: path from the repository root, and its content. */
export function referencePages(): ReadonlyMap<string, string> {
  return new Map([
    ["docs/reference/spec.md", specReferencePage()],
    ["docs/reference/cli.md", cliReferencePage()],
    ["docs/reference/metrics.md", metricsReferencePage()],
    ["docs/reference/errors.md", errorsReferencePage()],
  ]);
}
