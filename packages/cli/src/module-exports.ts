// What a spec's modules must export. The runtime's `defineComputation(...)` brands its result with
// this registered symbol; checking the symbol instead of importing @sluice/runtime keeps `sluice
// validate` independent of the runtime and accepts a computation from any copy of it.
export const COMPUTATION_BRAND = Symbol.for("sluice.computation");

export function isComputation(value: unknown): boolean {
  if ((typeof value !== "object" && typeof value !== "function") || value === null) return false;
  return (value as { [COMPUTATION_BRAND]?: unknown })[COMPUTATION_BRAND] === true;
}

/** Why a module's default export is not a computation, or undefined when it is one. */
export function computationExportProblem(moduleNamespace: Record<string, unknown>): string | undefined {
  const expected = "`export default defineComputation({ … })` (from @sluice/runtime)";
  if (!("default" in moduleNamespace)) return `it has no default export; expected ${expected}`;
  const exported = moduleNamespace["default"];
  if (isComputation(exported)) return undefined;
  const got =
    typeof exported === "object" && exported !== null && !Array.isArray(exported) ? "an object that defineComputation did not create" : kindOf(exported);
  return `its default export is not a computation: expected ${expected}, got ${got}`;
}

/** Why a module's default export is not a stream generator, or undefined when it is one. */
export function generatorExportProblem(moduleNamespace: Record<string, unknown>): string | undefined {
  const expected = "a function (index) => ({ key, value }) or an rxjs Observable of messages";
  if (!("default" in moduleNamespace)) return `it has no default export; expected ${expected}`;
  const exported = moduleNamespace["default"];
  if (typeof exported === "function") return undefined;
  // An Observable, recognised by its shape: the CLI does not depend on rxjs itself.
  if (typeof exported === "object" && exported !== null && typeof (exported as { subscribe?: unknown }).subscribe === "function") return undefined;
  return `its default export must be ${expected}, got ${kindOf(exported)}`;
}

function kindOf(value: unknown): string {
  if (value === undefined || value === null) return String(value);
  if (typeof value === "function") return "a function";
  if (Array.isArray(value)) return "an array";
  if (typeof value === "object") return "an object";
  return `a ${typeof value} (${JSON.stringify(value) ?? String(value)})`;
}
