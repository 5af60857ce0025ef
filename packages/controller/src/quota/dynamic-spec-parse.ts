// Turns an UpdateDynamicSpec call's JSON text into a validated DynamicSpec, or a refusal that says
// where it is wrong and that the version in force stays. Pure: the Controller applies the result.
import { SluiceError } from "@sluice/core";
import { parseJson, validateDynamicSpec, type DynamicSpec } from "@sluice/spec";

/** The validated spec in `dynamicSpecJson`; throws SPEC_INVALID naming the issues and `currentVersion`. */
export function parseDynamicSpecUpdate(dynamicSpecJson: string, computations: readonly string[], currentVersion: number): DynamicSpec {
  const unchanged = `nothing changed, version ${currentVersion} stays in force`;
  const parsed = parseJson(dynamicSpecJson);
  if (!parsed.ok) {
    const { line, column, offset } = parsed;
    throw new SluiceError("SPEC_INVALID", `dynamic_spec_json is not valid JSON at line ${line}, column ${column} (${parsed.message}); ${unchanged}`, {
      version: currentVersion,
      line,
      column,
      offset,
    });
  }
  const result = validateDynamicSpec(parsed.value, { computations, pathPrefix: "dynamic_spec" });
  if (!result.ok) {
    const listed = result.issues.map((issue) => `${issue.path}: ${issue.message}`).join("; ");
    throw new SluiceError(
      "SPEC_INVALID",
      `dynamic_spec was refused (${result.issues.length} ${result.issues.length === 1 ? "issue" : "issues"}; ${unchanged}): ${listed}`,
      { version: currentVersion, issues: result.issues },
    );
  }
  return result.value;
}
