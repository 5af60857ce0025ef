import assert from "node:assert/strict";
import { readdirSync, readFileSync } from "node:fs";
import { join, resolve } from "node:path";
import { fileURLToPath } from "node:url";
import { describe, it } from "node:test";

// docs/design.md §2.1 draws the package graph in a `package-graph` block of `from -> to` lines, one
// per `@sluice/*` dependency a package.json declares. A change of the boundaries must update the
// drawing in the same commit; this test says which edges differ. It also checks that every
// `docs/design.md §N` cited in the sources is a section the document has.

const root = resolve(fileURLToPath(import.meta.url), "../../..");
const designPath = resolve(root, "docs/design.md");

interface PackageJson {
  readonly name?: string;
  readonly dependencies?: Record<string, string>;
  readonly devDependencies?: Record<string, string>;
  readonly peerDependencies?: Record<string, string>;
  readonly optionalDependencies?: Record<string, string>;
}

/** `from -> to` for every @sluice/* dependency of packages/<dir>/package.json, named by directory. */
function declaredEdges(): string[] {
  const packagesDir = resolve(root, "packages");
  const dirs = readdirSync(packagesDir, { withFileTypes: true })
    .filter((e) => e.isDirectory())
    .map((e) => e.name);
  const manifests = new Map(dirs.map((dir) => [dir, JSON.parse(readFileSync(join(packagesDir, dir, "package.json"), "utf8")) as PackageJson]));
  const dirByName = new Map([...manifests].map(([dir, json]) => [json.name ?? dir, dir]));
  const edges = new Set<string>();
  for (const [dir, json] of manifests) {
    const deps = { ...json.dependencies, ...json.devDependencies, ...json.peerDependencies, ...json.optionalDependencies };
    for (const name of Object.keys(deps)) {
      const target = dirByName.get(name);
      if (target !== undefined && target !== dir) edges.add(`${dir} -> ${target}`);
    }
  }
  return [...edges].sort();
}

function drawnEdges(markdown: string): string[] {
  const block = /^```package-graph\n([\s\S]*?)^```/m.exec(markdown)?.[1];
  assert.ok(block !== undefined, "docs/design.md has a ```package-graph block (§2.1)");
  return block
    .split("\n")
    .map((line) => line.trim())
    .filter((line) => line !== "" && !line.startsWith("#"))
    .map((line) => {
      const edge = /^([a-z0-9-]+)\s*->\s*([a-z0-9-]+)$/.exec(line);
      assert.ok(edge, `package-graph line "${line}" is not "from -> to"`);
      return `${edge[1]} -> ${edge[2]}`;
    })
    .sort();
}

function sourceFiles(dir: string): string[] {
  return readdirSync(dir, { withFileTypes: true }).flatMap((entry) => {
    const path = join(dir, entry.name);
    if (entry.isDirectory()) return entry.name === "node_modules" ? [] : sourceFiles(path);
    return /\.(ts|js|mjs|proto|py)$/.test(entry.name) ? [path] : [];
  });
}

describe("docs/design.md", () => {
  const design = readFileSync(designPath, "utf8");

  it("draws the package graph the package.json files declare", () => {
    const declared = declaredEdges();
    const drawn = drawnEdges(design);
    const missing = declared.filter((e) => !drawn.includes(e));
    const extra = drawn.filter((e) => !declared.includes(e));
    assert.deepEqual(
      { missing, extra },
      { missing: [], extra: [] },
      "update the package-graph block of docs/design.md §2.1 (missing: declared but not drawn; extra: drawn but not declared)",
    );
  });

  it("has every section that the sources cite as docs/design.md §N", () => {
    // Numbered headings ("## 2. …", "### 2.1 …") and the numbered rows of §6's table ("| 6.3 |").
    const headings = [...design.matchAll(/^#{2,4} (\d+(?:\.\d+)*)\.? /gm)].map((m) => m[1]);
    const rows = [...design.matchAll(/^\| (\d+\.\d+) \|/gm)].map((m) => m[1]);
    const sections = new Set([...headings, ...rows]);
    assert.ok(sections.size > 10, `only ${sections.size} numbered sections found`);
    const missing: string[] = [];
    for (const file of sourceFiles(resolve(root, "packages"))) {
      for (const match of readFileSync(file, "utf8").matchAll(/docs\/design\.md §(\d+(?:\.\d+)*)/g)) {
        if (!sections.has(match[1] ?? "")) missing.push(`${file.slice(root.length + 1)}: §${match[1]}`);
      }
    }
    assert.deepEqual(missing, [], "cited sections that docs/design.md does not have");
  });
});
