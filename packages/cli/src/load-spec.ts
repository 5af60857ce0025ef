import { readFile, stat } from "node:fs/promises";
import { dirname, resolve } from "node:path";
import { pathToFileURL } from "node:url";
import { formatIssuePath, parseJson, sortIssues, validatePipelineSpec, type IssuePathSegment, type PipelineSpec, type SpecIssue } from "@sluice/spec";
import { computationExportProblem, generatorExportProblem } from "./module-exports.ts";

// Everything `sluice validate` (and later `sluice run`) checks before starting: the file reads, it is
// JSON, the spec is valid, and every module it names exists and exports the right thing. Modules are
// checked even when the spec has other issues, so one run reports everything. Importing a module runs
// its top-level code; `.ts` modules load through tsx, which the `sluice` bin registers in
// `beforeModules`, just before the first of them (not on every start: it costs CPU).

export type LoadedSpec = { ok: true; spec: PipelineSpec; specPath: string; specDir: string } | { ok: false; issues: SpecIssue[] };

type ExportCheck = (moduleNamespace: Record<string, unknown>) => string | undefined;

interface ModuleReference {
  readonly path: readonly IssuePathSegment[];
  readonly specifier: string;
  readonly check: ExportCheck;
}

export interface LoadSpecOptions {
  /** Runs once before the first module the spec names is imported. */
  readonly beforeModules?: (() => Promise<void>) | undefined;
}

export async function loadPipelineSpec(path: string, options: LoadSpecOptions = {}): Promise<LoadedSpec> {
  const specPath = resolve(path);
  const specDir = dirname(specPath);

  let text: string;
  try {
    text = await readFile(specPath, "utf8");
  } catch (error) {
    return { ok: false, issues: [rootIssue(`cannot read the spec file ${specPath}: ${readFailure(error)}`)] };
  }

  const parsed = parseJson(text);
  if (!parsed.ok) {
    const where = `line ${parsed.line}, column ${parsed.column}`;
    return { ok: false, issues: [rootIssue(`${specPath} is not valid JSON at ${where}: ${parsed.message}`)] };
  }

  const validation = validatePipelineSpec(parsed.value);
  const issues = validation.ok ? [] : [...validation.issues];
  const references = moduleReferences(parsed.value);
  if (references.length > 0) await options.beforeModules?.();
  for (const reference of references) {
    const problem = await checkModule(resolve(specDir, reference.specifier), reference.check);
    if (problem !== undefined) issues.push({ path: formatIssuePath(reference.path), message: problem });
  }

  if (validation.ok && issues.length === 0) return { ok: true, spec: validation.value, specPath, specDir };
  return { ok: false, issues: sortIssues(issues) };
}

/** Modules named by the raw document, read defensively: the spec may be invalid elsewhere. */
function moduleReferences(document: unknown): ModuleReference[] {
  const references: ModuleReference[] = [];
  if (!isObject(document)) return references;
  const { computations, streams } = document;
  if (isObject(computations)) {
    for (const [name, computation] of Object.entries(computations)) {
      const specifier = isObject(computation) ? computation["module"] : undefined;
      if (typeof specifier !== "string" || specifier === "") continue;
      references.push({ path: ["computations", name, "module"], specifier, check: computationExportProblem });
    }
  }
  if (isObject(streams)) {
    for (const [name, stream] of Object.entries(streams)) {
      const generator = isObject(stream) ? stream["generator"] : undefined;
      const specifier = isObject(generator) ? generator["module"] : undefined;
      if (typeof specifier !== "string" || specifier === "") continue;
      references.push({ path: ["streams", name, "generator", "module"], specifier, check: generatorExportProblem });
    }
  }
  return references;
}

async function checkModule(modulePath: string, check: ExportCheck): Promise<string | undefined> {
  try {
    const stats = await stat(modulePath);
    if (!stats.isFile()) return `${modulePath} is not a file (module paths are resolved relative to the spec file)`;
  } catch {
    return `module file not found: ${modulePath} (module paths are resolved relative to the spec file)`;
  }
  let namespace: Record<string, unknown>;
  try {
    namespace = (await import(pathToFileURL(modulePath).href)) as Record<string, unknown>;
  } catch (error) {
    return `importing ${modulePath} failed: ${error instanceof Error ? error.message : String(error)}`;
  }
  const problem = check(esmExports(namespace));
  return problem === undefined ? undefined : `${modulePath}: ${problem}`;
}

/**
 * A `.ts` file outside a `"type": "module"` package loads as CommonJS through tsx, and its ESM
 * exports then sit one level down, under `default`, flagged with `__esModule`.
 */
function esmExports(namespace: Record<string, unknown>): Record<string, unknown> {
  const inner = namespace["default"];
  return isObject(inner) && inner["__esModule"] === true ? inner : namespace;
}

function rootIssue(message: string): SpecIssue {
  return { path: formatIssuePath([]), message };
}

function readFailure(error: unknown): string {
  const code = (error as { code?: unknown }).code;
  if (code === "ENOENT") return "no such file";
  if (code === "EISDIR") return "it is a directory";
  if (code === "EACCES") return "permission denied";
  return error instanceof Error ? error.message : String(error);
}

function isObject(value: unknown): value is Record<string, unknown> {
  return typeof value === "object" && value !== null && !Array.isArray(value);
}
