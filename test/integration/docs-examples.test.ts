// slow: it type-checks every ts example against the packages' sources (scripts/run-test-files.mjs)
import assert from "node:assert/strict";
import { existsSync, readdirSync, readFileSync } from "node:fs";
import { dirname, join, relative, resolve } from "node:path";
import { fileURLToPath } from "node:url";
import { describe, it } from "node:test";
import ts from "typescript";
import { parse as parseYaml } from "yaml";
import { formatIssues, validateDynamicSpec, validatePipelineSpec } from "@sluice/spec";

// Every example in README.md, docs/ and the packages' READMEs is checked against the code as it is: ```ts blocks are
// type-checked as modules placed beside their page (so relative imports work, `@sluice/*` resolves
// to the packages' sources), ```json blocks must be a pipeline spec or a dynamic_spec the spec
// parser accepts, ```yaml blocks must parse, and every `sluice <command> --option` in a ```bash
// block must be a command and option of the CLI (as docs/reference/cli.md, generated from the
// command definitions, lists them). Relative links must name files that exist.

const root = resolve(fileURLToPath(import.meta.url), "../../..");

interface Block {
  readonly page: string;
  readonly line: number;
  readonly lang: string;
  readonly code: string;
}

function markdownFiles(dir: string): string[] {
  return readdirSync(dir, { withFileTypes: true }).flatMap((entry) => {
    const path = join(dir, entry.name);
    if (entry.isDirectory()) return entry.name === "node_modules" ? [] : markdownFiles(path);
    return entry.name.endsWith(".md") ? [path] : [];
  });
}

function blocksOf(path: string): Block[] {
  const lines = readFileSync(path, "utf8").split("\n");
  const blocks: Block[] = [];
  let open: { lang: string; line: number; body: string[] } | null = null;
  lines.forEach((text, index) => {
    const fence = /^```(\S*)/.exec(text);
    if (open === null && fence) open = { lang: fence[1] ?? "", line: index + 1, body: [] };
    else if (open !== null && text.startsWith("```")) {
      blocks.push({ page: path, line: open.line, lang: open.lang, code: open.body.join("\n") });
      open = null;
    } else open?.body.push(text);
  });
  assert.equal(open, null, `${relative(root, path)}: a code fence is not closed`);
  return blocks;
}

const packageReadmes = readdirSync(join(root, "packages"))
  .map((dir) => join(root, "packages", dir, "README.md"))
  .filter((path) => existsSync(path));
const pages = [join(root, "README.md"), ...markdownFiles(join(root, "docs")), ...packageReadmes];
const blocks = pages.flatMap(blocksOf);
const where = (block: Block) => `${relative(root, block.page)}:${block.line}`;

/** Commands and their options, from the generated CLI reference. */
function cliOptions(): Map<string, Set<string>> {
  const commands = new Map<string, Set<string>>();
  let current: Set<string> | undefined;
  for (const line of readFileSync(join(root, "docs/reference/cli.md"), "utf8").split("\n")) {
    const heading = /^## `sluice (\w+)`/.exec(line);
    if (heading) commands.set(heading[1] ?? "", (current = new Set(["--help"])));
    for (const option of line.startsWith("| `-") ? line.matchAll(/--[a-z][a-z-]*/g) : []) current?.add(option[0]);
  }
  return commands;
}

describe("examples in README.md and docs/", () => {
  it("finds the examples", () => {
    assert.ok(blocks.filter((b) => b.lang === "ts").length >= 5, "ts examples found");
    assert.ok(blocks.filter((b) => b.lang === "json").length >= 5, "json examples found");
  });

  it("type-checks every ts block", () => {
    const base = ts.parseJsonConfigFileContent(ts.readConfigFile(join(root, "tsconfig.base.json"), ts.sys.readFile).config, ts.sys, root);
    const options: ts.CompilerOptions = { ...base.options, noEmit: true, baseUrl: root, paths: { "@sluice/*": ["packages/*/src/index.ts"] } };
    const virtual = new Map<string, Block>();
    blocks.filter((b) => b.lang === "ts").forEach((block, i) => virtual.set(join(dirname(block.page), `__docs_example_${i}.ts`), block));
    const host = ts.createCompilerHost(options);
    const getSourceFile = host.getSourceFile.bind(host);
    host.fileExists = (name) => virtual.has(name) || ts.sys.fileExists(name);
    host.readFile = (name) => virtual.get(name)?.code ?? ts.sys.readFile(name);
    host.getSourceFile = (name, language, onError, create) => {
      const block = virtual.get(name);
      return block ? ts.createSourceFile(name, block.code, language, true) : getSourceFile(name, language, onError, create);
    };
    const program = ts.createProgram([...virtual.keys()], options, host);
    const problems = [...virtual].flatMap(([name, block]) =>
      ts.getPreEmitDiagnostics(program, program.getSourceFile(name)).map((d) => {
        const line = d.file && d.start !== undefined ? d.file.getLineAndCharacterOfPosition(d.start).line + 1 : 0;
        return `${relative(root, block.page)}:${block.line + line}: ${ts.flattenDiagnosticMessageText(d.messageText, "\n")}`;
      }),
    );
    assert.deepEqual(problems, [], "type errors in ts examples");
  });

  it("parses every json block as a pipeline spec or a dynamic_spec", () => {
    const problems: string[] = [];
    for (const block of blocks.filter((b) => b.lang === "json")) {
      let value: unknown;
      try {
        value = JSON.parse(block.code);
      } catch (error) {
        problems.push(`${where(block)}: not JSON: ${(error as Error).message}`);
        continue;
      }
      const spec = typeof value === "object" && value !== null ? value : {};
      const result = "pipeline" in spec ? validatePipelineSpec(spec) : "throttlers" in spec ? validateDynamicSpec(spec) : null;
      if (result === null) problems.push(`${where(block)}: neither a pipeline spec nor a dynamic_spec`);
      else if (!result.ok) problems.push(`${where(block)}: ${formatIssues(result.issues)}`);
    }
    assert.deepEqual(problems, []);
  });

  it("parses every yaml block", () => {
    for (const block of blocks.filter((b) => b.lang === "yaml")) assert.doesNotThrow(() => parseYaml(block.code), where(block));
  });

  it("names only commands and options the CLI has in bash blocks", () => {
    const commands = cliOptions();
    assert.ok(commands.has("worker") && commands.get("controller")?.has("--advertise"), "the CLI reference is read");
    const problems: string[] = [];
    for (const block of blocks.filter((b) => b.lang === "bash")) {
      for (const line of block.code.split("\n")) {
        for (const call of line.split(/&&|\||;/)) {
          const words = call.replace(/#.*$/, "").trim().split(/\s+/);
          const at = words.findIndex((w, i) => w === "sluice" && (i === 0 || ["exec", "npx"].includes(words[i - 1] ?? "")));
          if (at < 0) continue;
          const command = words[at + 1] ?? "";
          const known = commands.get(command);
          if (known === undefined) problems.push(`${where(block)}: sluice ${command} is not a command`);
          for (const option of words.slice(at + 2).filter((w) => /^--[a-z]/.test(w))) {
            if (!known?.has(option.split("=")[0] ?? "")) problems.push(`${where(block)}: sluice ${command} has no option ${option}`);
          }
        }
      }
    }
    assert.deepEqual(problems, []);
  });

  it("links only to files that exist", () => {
    const broken: string[] = [];
    for (const page of pages) {
      const text = readFileSync(page, "utf8").replace(/^```[\s\S]*?^```/gm, "");
      for (const link of text.matchAll(/\]\(([^)#\s]+)(?:#[^)]*)?\)/g)) {
        const target = link[1] ?? "";
        if (/^[a-z]+:/.test(target)) continue;
        const path = resolve(dirname(page), target);
        if (!existsSync(path)) broken.push(`${relative(root, page)}: ${target}`);
      }
    }
    assert.deepEqual(broken, []);
  });

  it("lets a new user find the five first answers from the README within two clicks", () => {
    const readme = readFileSync(join(root, "README.md"), "utf8");
    const answers: [question: string, page: string, needle: string][] = [
      ["run the quickstart", "docs/getting-started/quickstart.md", "pnpm install && pnpm start"],
      ["call an API under a limit", "docs/guides/writing-computations.md", "## Calling an API under a limit"],
      ["run on Kafka with two controllers", "docs/getting-started/kafka.md", "--port 7071"],
      ["read a trace", "docs/operations/observability.md", "## Reading a trace"],
      ["look up an error code", "docs/reference/errors.md", "| `CONTROLLER_UNAVAILABLE` |"],
    ];
    for (const [question, page, needle] of answers) {
      assert.ok(readme.includes(`](${page})`) || readme.includes(`](${page}#`), `README links to ${page} (${question})`);
      assert.ok(readFileSync(join(root, page), "utf8").includes(needle), `${page} answers "${question}"`);
    }
  });
});
