import type * as z from "zod";
import { isPlainObject } from "./cross-check.ts";
import { closestMatch } from "./did-you-mean.ts";
import { dynamicSpecSchema, undeclaredComputations, type DynamicSpec } from "./dynamic-spec.ts";
import { compareIssuePaths, formatIssuePath, type IssuePathSegment } from "./issue-path.ts";
import { knownKeysAt } from "./known-keys.ts";
import { pipelineSpecSchema, type PipelineSpec } from "./pipeline-spec.ts";
import { reservedNameMessage, reservedNamePaths } from "./reserved-names.ts";
import { mustBe } from "./rule-error.ts";

// Validation entry points. Zod does all the checking — field rules and cross-references alike, the
// latter as refinements that run even where parts of the document failed — so one parse yields
// every issue at once. This file turns zod's issues into sentences with dotted paths, sorted.

export interface SpecIssue {
  /** Dotted JSON path from the document root, e.g. `dynamic_spec.throttlers.api.period`; `(root)` for the root. */
  readonly path: string;
  /** A sentence a person can act on: the rule, and the bad value. */
  readonly message: string;
}

export type ValidationResult<T> = { ok: true; value: T } | { ok: false; issues: SpecIssue[] };

export interface DynamicSpecValidationOptions {
  /** Names of the pipeline's computations; when given, `computations.<name>` keys must be among them. */
  readonly computations?: readonly string[];
  /** Prefix of every issue path, e.g. "dynamic_spec" when the dynamic spec came from a pipeline file. */
  readonly pathPrefix?: string;
}

export function validatePipelineSpec(input: unknown): ValidationResult<PipelineSpec> {
  const result = pipelineSpecSchema.safeParse(input, parseOptions);
  const reserved = reservedNameIssues(input, []);
  if (result.success && reserved.length === 0) return { ok: true, value: result.data };
  const issues = result.success ? [] : toSpecIssues(result.error.issues, pipelineSpecSchema, []);
  return { ok: false, issues: sortIssues([...issues, ...reserved]) };
}

export function validateDynamicSpec(input: unknown, options: DynamicSpecValidationOptions = {}): ValidationResult<DynamicSpec> {
  const prefix = options.pathPrefix === undefined || options.pathPrefix === "" ? [] : options.pathPrefix.split(".");
  const result = dynamicSpecSchema.safeParse(input, parseOptions);
  const issues = result.success ? [] : toSpecIssues(result.error.issues, dynamicSpecSchema, prefix);
  issues.push(...reservedNameIssues(input, prefix));
  if (options.computations !== undefined && isPlainObject(input) && isPlainObject(input["computations"])) {
    for (const issue of undeclaredComputations(input["computations"], options.computations)) {
      issues.push({ path: formatIssuePath([...prefix, ...issue.path]), message: issue.message });
    }
  }
  if (result.success && issues.length === 0) return { ok: true, value: result.data };
  return { ok: false, issues: sortIssues(issues) };
}

/** One line per issue: `path: message`. */
export function formatIssues(issues: readonly SpecIssue[]): string {
  return issues.map((issue) => `${issue.path}: ${issue.message}`).join("\n");
}

/** Sorted by path (root first, array indexes numerically), keeping the order of issues on one path. */
export function sortIssues(issues: readonly SpecIssue[]): SpecIssue[] {
  return [...issues].sort((a, b) => compareIssuePaths(a.path, b.path));
}

// Input is kept on issues for messages; fields without their own rule fall back to this wording.
const parseOptions = { reportInput: true, error: mustBe("valid") } as const;

function toSpecIssues(zodIssues: readonly z.core.$ZodIssue[], root: z.ZodType, prefix: readonly IssuePathSegment[]): SpecIssue[] {
  const seen = new Set<string>();
  const issues: SpecIssue[] = [];
  const add = (path: readonly PropertyKey[], message: string) => {
    const formatted = formatIssuePath([...prefix, ...path.map(toSegment)]);
    const key = `${formatted}\u0000${message}`;
    if (seen.has(key)) return;
    seen.add(key);
    issues.push({ path: formatted, message });
  };
  for (const issue of zodIssues) {
    if (issue.code === "unrecognized_keys") {
      const known = knownKeysAt(root, issue.path);
      for (const key of issue.keys) add([...issue.path, key], unknownKeyMessage(key, known));
    } else if (issue.code === "invalid_key") {
      // A record key failed its own schema; its message is the sentence (e.g. the reserved class id).
      add(issue.path, issue.issues[0]?.message ?? issue.message);
    } else {
      add(issue.path, issue.message);
    }
  }
  return sortIssues(issues);
}

/** A `__proto__` key anywhere would be dropped silently by the schema: each is an issue at its path. */
function reservedNameIssues(input: unknown, prefix: readonly IssuePathSegment[]): SpecIssue[] {
  return reservedNamePaths(input).map((path) => ({ path: formatIssuePath([...prefix, ...path]), message: reservedNameMessage() }));
}

function unknownKeyMessage(key: string, known: readonly string[]): string {
  const suggestion = closestMatch(key, known);
  if (suggestion !== undefined) return `unknown key ${JSON.stringify(key)}; did you mean ${JSON.stringify(suggestion)}?`;
  if (known.length === 0) return `unknown key ${JSON.stringify(key)}`;
  return `unknown key ${JSON.stringify(key)}; allowed keys: ${known.join(", ")}`;
}

function toSegment(segment: PropertyKey): IssuePathSegment {
  return typeof segment === "number" ? segment : String(segment);
}
