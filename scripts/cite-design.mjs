#!/usr/bin/env node
// Rewrites citations of the design contract outside the repository ("DESIGN §7.4", "DESIGN.md §3")
// into citations of the repository's own docs/design.md ("docs/design.md §5.2"), by the table
// below. Idempotent: a second run finds nothing to rewrite. Run it after merging a branch that adds
// such citations: `node scripts/cite-design.mjs` (`--check` only lists them and exits 1 if any).
// A citation of a section the table does not know stops the script with its file and line.
import { readdirSync, readFileSync, writeFileSync } from "node:fs";
import { join, relative, resolve } from "node:path";
import { fileURLToPath } from "node:url";

const root = resolve(fileURLToPath(import.meta.url), "../..");

/** Section of the contract → section of docs/design.md. */
const SECTIONS = {
  1: "1", // glossary → vocabulary
  2: "2", // layout and dependency direction → packages and their arrows
  2.1: "3", // one Process iteration
  3: "8", // the pipeline spec
  3.1: "8.1",
  3.2: "8.2",
  4: "9", // throttler semantics; §4.N is its rule N
  4.1: "9.1",
  4.2: "9.2",
  4.3: "9.3",
  4.4: "9.4",
  4.5: "9.5",
  4.6: "9.6",
  4.7: "9.7",
  4.8: "9.8",
  4.9: "9.9",
  "4.10": "9.10",
  5: "4", // the wire contract
  6: "10", // the user API
  7: "11",
  7.1: "11.1", // smooth
  7.2: "11.2", // concurrency
  7.3: "11.3", // adaptive
  7.4: "5.2", // controller failover
  7.5: "12", // lag timestamp, stream_delay, alignment
  7.6: "13", // exactly-once
  7.7: "14", // installable, standalone client
  9.1: "5.3", // fenced controller state
  9.2: "11.4", // keyed throttlers
  9.3: "15", // epoch parts and traces
};

/**
 * Where the same number meant something else: the contract's §4.1 is both rule 1 of §4 (the token
 * bucket) and the heading of its error-code table; these files cite the table. §8 of the contract
 * is its conventions; the one file that cites it means the retry rule.
 */
const BY_FILE = {
  "packages/protocol/src/error-mapping.ts": { 4.1: "4.5" },
  "packages/protocol/proto/sluice/throttler/v1/quota.proto": { 4.1: "4.5" },
  "packages/protocol/test/error-mapping.test.ts": { 4.1: "4.5" },
  "packages/controller/test/hostile-wire.test.ts": { 4.1: "4.5" },
  "packages/core/src/sluice-error.ts": { 4.1: "4.5" },
  "test/e2e/python-client.test.ts": { 4.1: "4.5" },
  "clients/python/sluice_client/errors.py": { 4.1: "4.5" },
  "packages/client/test/abort-while-unreachable.test.ts": { 8: "9.8" },
};

/** Bare "§N" that continue a sentence begun with a contract citation, rewritten as they stand. */
const LITERAL = {
  "packages/client/src/distributed-throttler-factory.ts": [["leasing for a concurrency one (§7.2)", "leasing for a concurrency one (§11.2)"]],
  "packages/spec/src/client-config.ts": [["a smooth client paces what it hands out, §7.1)", "a smooth client paces what it hands out, §11.1)"]],
};

const ROOTS = ["packages", "test", "scripts", "clients", "bench", "examples", "tools"];
const SOURCE = /\.(ts|mts|js|mjs|cjs|proto|py)$/;
const SKIP_DIRS = new Set(["node_modules", "dist", ".tools", "artifacts", "__pycache__"]);
// "DESIGN §7.4", "DESIGN.md §3–§3.2", "DESIGN §7.2, §7.4", "DESIGN §4.1 and §4.7".
const CITATION = /DESIGN(?:\.md)? (§\d+(?:\.\d+)*(?:(?:, | and |–|-|\/)§\d+(?:\.\d+)*)*)/g;

function sourceFiles(dir) {
  let entries;
  try {
    entries = readdirSync(dir, { withFileTypes: true });
  } catch {
    return [];
  }
  return entries.flatMap((entry) => {
    const path = join(dir, entry.name);
    if (entry.isDirectory()) return SKIP_DIRS.has(entry.name) ? [] : sourceFiles(path);
    return SOURCE.test(entry.name) && path !== fileURLToPath(import.meta.url) ? [path] : [];
  });
}

const check = process.argv.includes("--check");
const unknown = [];
let citations = 0;
let files = 0;
for (const file of ROOTS.flatMap((dir) => sourceFiles(join(root, dir)))) {
  const rel = relative(root, file);
  const text = readFileSync(file, "utf8");
  if (!text.includes("DESIGN") && LITERAL[rel] === undefined) continue;
  const table = { ...SECTIONS, ...BY_FILE[rel] };
  let literal = text;
  for (const [from, to] of LITERAL[rel] ?? []) literal = literal.replace(from, to);
  const rewritten = literal.replace(CITATION, (match, sections, offset) => {
    citations += 1;
    const mapped = sections.replace(/§(\d+(?:\.\d+)*)/g, (_, section) => {
      const target = table[section];
      if (target === undefined) {
        const line = text.slice(0, offset).split("\n").length;
        unknown.push(`${rel}:${line}: ${match} (§${section} is not in scripts/cite-design.mjs)`);
        return `§${section}`;
      }
      return `§${target}`;
    });
    return `docs/design.md ${mapped}`;
  });
  if (rewritten === text) continue;
  files += 1;
  if (check) console.log(`${rel}: cites the design contract outside the repository`);
  else writeFileSync(file, rewritten);
}
if (unknown.length > 0) {
  console.error(`cite-design: ${unknown.length} citation(s) of sections the table does not map:\n${unknown.join("\n")}`);
  process.exit(2);
}
console.log(`cite-design: ${citations} citation(s) in ${files} file(s) ${check ? "to rewrite" : "rewritten"}`);
if (check && citations > 0) process.exit(1);
