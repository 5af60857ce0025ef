#!/usr/bin/env node
// `pnpm build`: compiles every publishable package into its own dist/ (JavaScript, .d.ts and source
// maps) with `tsc -b tsconfig.build.json`, in dependency order, from a clean slate so that no output
// of a deleted source survives into a tarball. Development and tests never need this: they run the
// TypeScript sources (each package's "exports" points at src/; publishConfig points the packed
// package at dist/).
import { spawnSync } from "node:child_process";
import { copyFileSync, mkdirSync, rmSync } from "node:fs";
import { dirname, join, resolve } from "node:path";
import { fileURLToPath } from "node:url";
import { publishablePackages } from "./publishable-packages.mjs";

const root = resolve(fileURLToPath(import.meta.url), "../..");

/** Files the compiled code reads next to itself (new URL("./…", import.meta.url)). */
const ASSETS = [
  "dashboard.html",
  "dashboard.css",
  "dashboard-format.js",
  "dashboard-charts.js",
  "dashboard-panels.js",
  "dashboard-epoch-parts.js",
  "dashboard.js",
].map((file) => ["controller", `status/${file}`]);

export function buildPackages() {
  const packages = publishablePackages(root);
  for (const pkg of packages) rmSync(join(pkg.dir, "dist"), { recursive: true, force: true });
  rmSync(join(root, "dist/build"), { recursive: true, force: true });
  const tsc = spawnSync("pnpm", ["exec", "tsc", "-b", "tsconfig.build.json"], { cwd: root, stdio: "inherit" });
  if (tsc.status !== 0) throw new Error(`tsc -b tsconfig.build.json failed (exit ${tsc.status}); the errors are above`);
  for (const [name, file] of ASSETS) {
    const target = join(root, "packages", name, "dist", file);
    mkdirSync(dirname(target), { recursive: true });
    copyFileSync(join(root, "packages", name, "src", file), target);
  }
  return packages;
}

if (process.argv[1] && resolve(process.argv[1]) === fileURLToPath(import.meta.url)) {
  const startedAt = Date.now();
  const packages = buildPackages();
  console.log(`built ${packages.map((p) => p.name).join(", ")} in ${((Date.now() - startedAt) / 1000).toFixed(1)} s`);
}
