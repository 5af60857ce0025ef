// The packages `pnpm build` compiles and `pnpm pack:all` packs: every packages/* whose package.json
// is not "private".
import { existsSync, readdirSync, readFileSync } from "node:fs";
import { join } from "node:path";

/** @returns {{ name: string, version: string, dir: string }[]} */
export function publishablePackages(root) {
  const base = join(root, "packages");
  return readdirSync(base, { withFileTypes: true })
    .filter((entry) => entry.isDirectory() && existsSync(join(base, entry.name, "package.json")))
    .map((entry) => {
      const dir = join(base, entry.name);
      const manifest = JSON.parse(readFileSync(join(dir, "package.json"), "utf8"));
      return { name: manifest.name, version: manifest.version, private: manifest.private === true, dir };
    })
    .filter((pkg) => !pkg.private)
    .map(({ name, version, dir }) => ({ name, version, dir }));
}
