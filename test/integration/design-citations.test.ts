import assert from "node:assert/strict";
import { type Dirent, readdirSync, readFileSync } from "node:fs";
import { join, resolve } from "node:path";
import { fileURLToPath } from "node:url";
import { describe, it } from "node:test";

// Comments cite the repository's own docs/design.md. Every section a source cites — including the
// later ones of "§5.2, §5.3" or "§8–§8.2" — must be a numbered heading (or a numbered row of §6's
// table) there, and no source may cite the contract outside the repository ("DESIGN §…"):
// scripts/cite-design.mjs rewrites those.

const root = resolve(fileURLToPath(import.meta.url), "../../..");
const ROOTS = ["packages", "test", "scripts", "clients", "bench", "examples", "tools"];
const SKIP = new Set(["node_modules", "dist", ".tools", "artifacts", "__pycache__"]);

function sourceFiles(dir: string): string[] {
  let entries: Dirent[];
  try {
    entries = readdirSync(dir, { withFileTypes: true });
  } catch {
    return [];
  }
  return entries.flatMap((entry) => {
    const path = join(dir, entry.name);
    if (entry.isDirectory()) return SKIP.has(entry.name) ? [] : sourceFiles(path);
    return /\.(ts|mts|js|mjs|cjs|proto|py)$/.test(entry.name) ? [path] : [];
  });
}

describe("citations of docs/design.md", () => {
  const design = readFileSync(join(root, "docs/design.md"), "utf8");
  const sections = new Set([
    ...[...design.matchAll(/^#{2,4} (\d+(?:\.\d+)*)\.? /gm)].map((m) => m[1] ?? ""),
    ...[...design.matchAll(/^\| (\d+\.\d+) \|/gm)].map((m) => m[1] ?? ""),
  ]);

  it("cite only sections the document has", () => {
    assert.ok(sections.has("9.10") && sections.has("5.3"), "numbered headings are found");
    const missing: string[] = [];
    for (const file of ROOTS.flatMap((dir) => sourceFiles(join(root, dir)))) {
      const text = readFileSync(file, "utf8");
      for (const match of text.matchAll(/docs\/design\.md (§\d+(?:\.\d+)*(?:(?:, | and |–|-|\/)§\d+(?:\.\d+)*)*)/g)) {
        for (const section of (match[1] ?? "").matchAll(/§(\d+(?:\.\d+)*)/g)) {
          if (!sections.has(section[1] ?? "")) missing.push(`${file.slice(root.length + 1)}: §${section[1]}`);
        }
      }
    }
    assert.deepEqual(missing, [], "cited sections that docs/design.md does not have");
  });

  it("leave nothing for scripts/cite-design.mjs to rewrite", () => {
    // The script's own pattern: a citation of the contract outside the repository.
    const outside = /DESIGN(?:\.md)? §\d/;
    const left = ROOTS.flatMap((dir) => sourceFiles(join(root, dir)))
      .filter((file) => !file.endsWith("scripts/cite-design.mjs") && outside.test(readFileSync(file, "utf8")))
      .map((file) => file.slice(root.length + 1));
    assert.deepEqual(left, [], "run `node scripts/cite-design.mjs` to rewrite these citations");
  });
});
