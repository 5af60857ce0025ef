// Module hooks registered by use-built-packages.mjs: a module of packages/<pkg>/src/ (however it was
// named: "@sluice/core", "@sluice/cli/main", a relative path) resolves to its compiled twin in
// packages/<pkg>/dist/ (tsc's rootDir src, outDir dist: same relative path, .ts → .js).
import { existsSync } from "node:fs";
import { fileURLToPath } from "node:url";

const PACKAGES = new URL("../../packages/", import.meta.url).href;
const SOURCE = /^([^/]+)\/src\/(.+)\.ts$/;

export async function resolve(specifier, context, nextResolve) {
  const resolved = await nextResolve(specifier, context);
  if (!resolved.url.startsWith(PACKAGES)) return resolved;
  const source = SOURCE.exec(resolved.url.slice(PACKAGES.length));
  if (!source) return resolved;
  const built = `${PACKAGES}${source[1]}/dist/${source[2]}.js`;
  if (!existsSync(fileURLToPath(built))) {
    throw new Error(
      `${fileURLToPath(built)} does not exist: run \`pnpm build\` (the end-to-end lane runs it first), or start the child without use-built-packages.mjs`,
    );
  }
  return { ...resolved, url: built, format: "module" };
}
