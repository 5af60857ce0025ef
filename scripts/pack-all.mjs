#!/usr/bin/env node
// `pnpm pack:all`: builds, then writes one tarball per publishable package into dist/packages/
// (docs/design.md §14), as `npm install ./dist/packages/*.tgz` takes them. `pnpm pack` applies each
// package's publishConfig (exports, main, types pointing at dist/) and turns workspace:* into versions.
// `--prebuilt` packs the dist/ that `pnpm build` left instead of building again: the end-to-end
// lane builds once and its other tests' children run that dist/ while this one packs.
import { spawn } from "node:child_process";
import { copyFileSync, existsSync, mkdirSync, readdirSync, rmSync, statSync } from "node:fs";
import { join, resolve } from "node:path";
import { fileURLToPath } from "node:url";
import { buildPackages } from "./build-packages.mjs";
import { publishablePackages } from "./publishable-packages.mjs";

const root = resolve(fileURLToPath(import.meta.url), "../..");
export const PACK_DIR = join(root, "dist/packages");

export async function packAll({ prebuilt = false } = {}) {
  const packages = prebuilt ? publishablePackages(root) : buildPackages();
  for (const pkg of packages) {
    if (!existsSync(join(pkg.dir, "dist"))) throw new Error(`${pkg.name} has no dist/ to pack: run \`pnpm build\` first, or pack:all without --prebuilt`);
  }
  rmSync(PACK_DIR, { recursive: true, force: true });
  mkdirSync(PACK_DIR, { recursive: true });
  // Side by side: each `pnpm pack` is mostly its own start, and they share nothing but PACK_DIR.
  await Promise.all(packages.map((pkg) => pack(pkg)));
  return readdirSync(PACK_DIR)
    .filter((file) => file.endsWith(".tgz"))
    .sort()
    .map((file) => join(PACK_DIR, file));
}

async function pack(pkg) {
  // The repository's LICENSE goes into every tarball (pack takes it from the package's folder).
  const license = join(pkg.dir, "LICENSE");
  copyFileSync(join(root, "LICENSE"), license);
  try {
    const child = spawn("pnpm", ["pack", "--pack-destination", PACK_DIR], { cwd: pkg.dir, stdio: ["ignore", "pipe", "pipe"] });
    let output = "";
    child.stdout.on("data", (chunk) => (output += chunk));
    child.stderr.on("data", (chunk) => (output += chunk));
    const status = await new Promise((resolve, reject) => {
      child.on("error", reject);
      child.on("close", resolve);
    });
    if (status !== 0) throw new Error(`pnpm pack of ${pkg.name} failed (exit ${status}):\n${output}`);
  } finally {
    rmSync(license, { force: true });
  }
}

if (process.argv[1] && resolve(process.argv[1]) === fileURLToPath(import.meta.url)) {
  const startedAt = Date.now();
  const tarballs = await packAll({ prebuilt: process.argv.includes("--prebuilt") });
  for (const file of tarballs) console.log(`${file.slice(root.length + 1)}  ${(statSync(file).size / 1024).toFixed(0)} KiB`);
  console.log(`${tarballs.length} tarballs in ${((Date.now() - startedAt) / 1000).toFixed(1)} s`);
}
