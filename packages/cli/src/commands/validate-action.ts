import { EXIT_FAILURE, EXIT_OK, type Cli } from "../cli.ts";
import { loadPipelineSpec } from "../load-spec.ts";
import { summarizeSpec } from "../spec-summary.ts";

export async function validateAction(cli: Cli, specPath: string): Promise<void> {
  const loaded = await loadPipelineSpec(specPath, { beforeModules: cli.beforeSpecModules });
  if (loaded.ok) {
    cli.stdout(`✓ ${summarizeSpec(loaded.spec)}\n`);
    cli.setExitCode(EXIT_OK);
    return;
  }
  for (const issue of loaded.issues) cli.stderr(`✗ ${issue.path}: ${issue.message}\n`);
  const count = loaded.issues.length;
  cli.stderr(`${count} ${count === 1 ? "issue" : "issues"} in ${specPath}\n`);
  cli.setExitCode(EXIT_FAILURE);
}
