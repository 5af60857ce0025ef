// Issue paths are dotted JSON paths from the document root: `dynamic_spec.throttlers.api.period`,
// `computations.Enricher.inputs[0]`, `(root)` for the document itself. A key that is not a plain
// identifier (empty, or containing dots, spaces, brackets) is written as `["my.key"]` so that a path
// always reads back unambiguously.

import { MAX_ID_LENGTH, quoteId } from "./id-length.ts";

export type IssuePathSegment = string | number;

export const ROOT_PATH = "(root)";

const PLAIN_KEY = /^[A-Za-z0-9_$-]+$/;

export function formatIssuePath(segments: readonly IssuePathSegment[]): string {
  let path = "";
  for (const segment of segments) {
    if (typeof segment === "number") path += `[${segment}]`;
    else if (segment.length > MAX_ID_LENGTH) path += `[${quoteId(segment)}]`;
    else if (PLAIN_KEY.test(segment)) path += path === "" ? segment : `.${segment}`;
    else path += `[${JSON.stringify(segment)}]`;
  }
  return path === "" ? ROOT_PATH : path;
}

/**
 * Orders paths so that the root comes first and array indexes compare as numbers
 * (`inputs[2]` before `inputs[10]`); everything else compares by UTF-16 code units, which keeps the
 * issues of one object together.
 */
export function compareIssuePaths(a: string, b: string): number {
  if (a === b) return 0;
  if (a === ROOT_PATH) return -1;
  if (b === ROOT_PATH) return 1;
  const partsA = a.split(/(\d+)/);
  const partsB = b.split(/(\d+)/);
  const length = Math.min(partsA.length, partsB.length);
  for (let i = 0; i < length; i++) {
    const partA = partsA[i] ?? "";
    const partB = partsB[i] ?? "";
    if (partA === partB) continue;
    // split() with a capturing group puts digit runs at odd indexes.
    if (i % 2 === 1) return Number(partA) - Number(partB) || (partA < partB ? -1 : 1);
    return partA < partB ? -1 : 1;
  }
  return partsA.length - partsB.length;
}
