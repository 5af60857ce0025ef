import type * as z from "zod";
import { isPlainObject } from "./cross-check.ts";

// Rules of `keyed.overrides` that involve the template (docs/design.md §11.4): a key's bucket is the
// template with the override's fields on top, so the merged fields must make a valid throttler.
// Each problem is reported at the override's field, since that is what the user wrote for the key.

type Issue = { readonly field: string; readonly message: string };

function mergedProblems(template: Record<string, unknown>, override: Record<string, unknown>, key: string): Issue[] {
  const merged = { ...template, ...override };
  const issues: Issue[] = [];
  const quoted = JSON.stringify(key);
  const has = (field: string) => override[field] !== undefined;
  const kind = template["kind"];
  if (kind === "concurrency") {
    for (const field of ["period", "smooth"]) {
      if (has(field)) {
        issues.push({ field, message: `${field} does not apply to a concurrency throttler, so key ${quoted} cannot override it; remove it from the override` });
      }
    }
  } else if (has("lease_timeout")) {
    issues.push({
      field: "lease_timeout",
      message: `lease_timeout applies only to concurrency throttlers (this one is a rate throttler); remove it from the override of key ${quoted}`,
    });
  }
  if (has("limit") && merged["limit"] !== null) {
    if (template["adaptive"] !== undefined) {
      issues.push({
        field: "limit",
        message: `key ${quoted} cannot override limit: the template's adaptive loop sets the limit of every key; remove limit from the override or adaptive from the template`,
      });
    } else if (template["use_class_weights_as_limit"] === true) {
      issues.push({
        field: "limit",
        message: `key ${quoted} cannot override limit: the template's use_class_weights_as_limit makes the rate the sum of the class weights; override classes instead`,
      });
    }
  }
  if (
    has("classes") &&
    template["use_class_weights_as_limit"] === true &&
    isPlainObject(override["classes"]) &&
    Object.keys(override["classes"]).length === 0
  ) {
    issues.push({
      field: "classes",
      message: `key ${quoted} needs at least one class: with use_class_weights_as_limit its rate is the sum of its class weights`,
    });
  }
  const limitless = merged["limit"] === null || merged["limit"] === undefined;
  if (
    (has("smooth") || has("limit")) &&
    merged["smooth"] === true &&
    limitless &&
    template["use_class_weights_as_limit"] !== true &&
    template["adaptive"] === undefined
  ) {
    issues.push({
      field: has("smooth") ? "smooth" : "limit",
      message: `key ${quoted} would be smooth without a limit: smooth paces units at the key's rate, and an unlimited key has none; give the key a limit or set smooth to false`,
    });
  }
  return issues;
}

/** Called by the throttler's refinement with the (partly) parsed throttler. */
export function checkKeyed(value: Record<string, unknown>, ctx: z.core.$RefinementCtx): void {
  const keyed = value["keyed"];
  if (!isPlainObject(keyed)) return;
  const overrides = keyed["overrides"];
  if (!isPlainObject(overrides)) return;
  for (const [key, override] of Object.entries(overrides)) {
    if (!isPlainObject(override)) continue;
    for (const { field, message } of mergedProblems(value, override, key)) {
      ctx.addIssue({ code: "custom", path: ["keyed", "overrides", key, field], input: override[field], message });
    }
  }
}
