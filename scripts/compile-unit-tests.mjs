// Compiles the unit lane's test files once, with esbuild, into a folder under test/artifacts/unit-build/:
// each test file becomes one ES module there, and the code they share (the packages' sources, the
// test support files) goes into chunks that every test process loads as plain JavaScript. Through
// tsx, each test process would resolve and transform all of those sources again (a few hundred
// modules, most of its start-up CPU); compiled once, they load like a built package.
//
// What stays as it was:
// - Third-party packages are not bundled: they load from node_modules, the file Node would pick.
// - `import.meta.url` (and `import.meta.dirname`, `.filename`) in a source file is its own path in
//   the checkout, not the compiled chunk's, so files read next to a source (fixtures, the .proto,
//   the dashboard's assets, docs/) are found where they are.
// - A module the code imports by a path computed at run time (a computation's `module`, a fixture)
//   is not bundled: a test file that loads a .ts one so declares `// loads TypeScript at run time`,
//   and its process gets tsx (scripts/run-test-files.mjs).
// - Source maps: `--enable-source-maps` shows stack traces at the .ts lines.
//
// Only node built-ins and esbuild (the version tsx uses); plain ESM so that it runs before anything
// is compiled.
import { readFileSync } from "node:fs";
import { rm } from "node:fs/promises";
import { join, relative, resolve } from "node:path";
import { pathToFileURL } from "node:url";

/** Where the runs' compiled files go, a folder per run (its runner's pid), removed when it ends. */
export const UNIT_BUILD_DIR = "test/artifacts/unit-build";

/** Keeps `import.meta.url` and friends pointing at the source file, not at the chunk it lands in. */
const sourcePaths = {
  name: "source-paths",
  setup(build) {
    build.onLoad({ filter: /\.[cm]?ts$/ }, (args) => {
      if (args.path.includes("/node_modules/")) return undefined;
      const text = readFileSync(args.path, "utf8");
      const contents = text
        .replaceAll("import.meta.url", JSON.stringify(pathToFileURL(args.path).href))
        .replaceAll("import.meta.dirname", JSON.stringify(resolve(args.path, "..")))
        .replaceAll("import.meta.filename", JSON.stringify(args.path));
      return { contents, loader: "ts" };
    });
  },
};

/**
 * Every bare import but the workspace's own packages stays an import of node_modules, of the file
 * Node would load for it: by its absolute path, since the package is a dependency of the importing
 * package and is not found from the compiled chunk's folder (pnpm links each package's own).
 */
const externalPackages = {
  name: "external-packages",
  setup(build) {
    build.onResolve({ filter: /^[^./]/ }, async (args) => {
      if (args.path.startsWith("@sluice/") || args.path.startsWith("node:") || args.pluginData === "external") return undefined;
      const found = await build.resolve(args.path, { kind: args.kind, resolveDir: args.resolveDir, pluginData: "external" });
      if (found.errors.length > 0) return { errors: found.errors };
      return { path: found.path, external: true };
    });
  },
};

/**
 * Compiles `files` (relative to `root`) into `outdir` (relative to `root`): `a/b.test.ts` becomes
 * `outdir/a/b.test.js`, which scripts/test-batch.mjs imports when SLUICE_UNIT_BUILD names `outdir`.
 */
export async function compileUnitTests(files, outdir, root = process.cwd()) {
  const { build } = await import("esbuild");
  await rm(join(root, outdir), { recursive: true, force: true });
  const result = await build({
    absWorkingDir: root,
    entryPoints: files,
    outbase: ".",
    outdir: join(root, outdir),
    bundle: true,
    splitting: true,
    format: "esm",
    platform: "node",
    // Node's own choice of a package's file: no "module" condition or field, which esbuild adds.
    conditions: [],
    mainFields: ["main"],
    target: "node20",
    sourcemap: "linked",
    metafile: true,
    logLevel: "warning",
    plugins: [externalPackages, sourcePaths],
  });
  const entries = new Set(Object.values(result.metafile.outputs).map((meta) => meta.entryPoint && relative(root, resolve(root, meta.entryPoint))));
  const missing = files.filter((file) => !entries.has(relative(root, resolve(root, file))));
  if (missing.length > 0) throw new Error(`esbuild wrote no module for ${missing.join(", ")}`);
}
