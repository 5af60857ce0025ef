import { isAbsolute, resolve } from "node:path";
import { pathToFileURL } from "node:url";
import { SluiceError } from "@sluice/core";
import { isComputation, type Computation } from "./computation.ts";

/** Imports a module named in the spec, relative to the spec file; TypeScript works when tsx is registered. */
export async function importSpecModule(specDir: string, modulePath: string, where: string): Promise<Record<string, unknown>> {
  const file = isAbsolute(modulePath) ? modulePath : resolve(specDir, modulePath);
  try {
    return (await import(pathToFileURL(file).href)) as Record<string, unknown>;
  } catch (error) {
    throw new SluiceError("SPEC_INVALID", `${where}: cannot load ${file}: ${error instanceof Error ? error.message : String(error)}`, {
      module: file,
    });
  }
}

export async function loadComputation(specDir: string, modulePath: string, name: string): Promise<Computation> {
  const where = `computations.${name}.module`;
  const module = await importSpecModule(specDir, modulePath, where);
  const computation = module["default"];
  if (!isComputation(computation)) {
    throw new SluiceError(
      "SPEC_INVALID",
      `${where}: ${modulePath} must export default defineComputation({ process(batch, ctx) { … } }) from "@sluice/runtime"`,
    );
  }
  return computation;
}
