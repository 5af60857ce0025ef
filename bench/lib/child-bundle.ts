import { mkdtempSync, readdirSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { pathToFileURL } from "node:url";
import { build, type Plugin } from "esbuild";
import { CHILDREN_DIR } from "./paths.ts";

/**
 * Quick mode's children, each bundled into one JavaScript file (esbuild, the packages' sources and
 * their dependencies included) and started with plain `node`. A child started through tsx (and the
 * built-packages hooks) spends about a CPU-second resolving and loading a few hundred modules before
 * it does anything; a quick run starts dozens of them for measurements of a fraction of a second, so
 * start-up was most of its cost. A full run keeps starting them from sources: its figures were taken
 * that way, and start-up is outside every timed window there.
 */
export interface ChildBundle {
  /** Where `<script>.js` (for `bench/children/<script>.ts`) is. */
  readonly dir: string;
  remove(): void;
}

/**
 * `import.meta.url` in a bundle would be the bundle's own address; the modules that read files next
 * to themselves (the quota .proto, the dashboard page, bench/lib/paths.ts) must keep their own.
 */
const keepModuleUrls: Plugin = {
  name: "keep-module-urls",
  setup(esbuild) {
    esbuild.onLoad({ filter: /\.ts$/ }, (args) => {
      if (args.path.includes("/node_modules/")) return undefined;
      const source = readFileSync(args.path, "utf8");
      return { contents: source.replaceAll("import.meta.url", JSON.stringify(pathToFileURL(args.path).href)), loader: "ts" };
    });
  },
};

export async function bundleChildren(): Promise<ChildBundle> {
  const dir = mkdtempSync(join(tmpdir(), "sluice-bench-children-"));
  const scripts = readdirSync(CHILDREN_DIR).filter((name) => name.endsWith(".ts"));
  try {
    await build({
      entryPoints: scripts.map((name) => join(CHILDREN_DIR, name)),
      outdir: dir,
      bundle: true,
      platform: "node",
      format: "esm",
      target: "node20",
      logLevel: "error",
      plugins: [keepModuleUrls],
      // CommonJS dependencies inside an ES module bundle still call require() for Node's built-ins.
      banner: { js: 'import { createRequire as __benchCreateRequire } from "node:module"; const require = __benchCreateRequire(import.meta.url);' },
    });
  } catch (error) {
    rmSync(dir, { recursive: true, force: true });
    throw error;
  }
  const remove = () => rmSync(dir, { recursive: true, force: true });
  // Also on the way out after Ctrl-C or an error, where run.ts exits without its finally.
  process.once("exit", remove);
  return { dir, remove };
}
