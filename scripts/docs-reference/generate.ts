import { mkdirSync, readFileSync, writeFileSync } from "node:fs";
import { dirname, resolve } from "node:path";
import { fileURLToPath } from "node:url";
import { referencePages } from "./pages.ts";

// `pnpm docs:reference`: writes docs/reference/*.md from the code. A test regenerates them in memory
// and fails when a committed page differs.

const root = resolve(fileURLToPath(import.meta.url), "../../..");
for (const [path, content] of referencePages()) {
  const file = resolve(root, path);
  let before: string | null = null;
  try {
    before = readFileSync(file, "utf8");
  } catch {
    before = null; // a new page
  }
  if (before === content) {
    console.log(`unchanged ${path}`);
    continue;
  }
  mkdirSync(dirname(file), { recursive: true });
  writeFileSync(file, content);
  console.log(`${before === null ? "created" : "updated"} ${path}`);
}
