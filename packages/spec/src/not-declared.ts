import { quoteList } from "./describe-value.ts";
import { closestMatch } from "./did-you-mean.ts";

/**
 * `throttler "api_quta" is not declared in dynamic_spec.throttlers (declared: "api_quota"); did you
 * mean "api_quota"?` — the sentence for every reference to a name that does not exist.
 */
export function notDeclaredMessage(kind: string, name: string, where: string, declared: readonly string[]): string {
  const list = declared.length === 0 ? `(no ${kind} is declared)` : `(declared: ${quoteList(declared)})`;
  const suggestion = closestMatch(name, declared);
  return (
    `${kind} ${JSON.stringify(name)} is not declared in ${where} ${list}` + (suggestion === undefined ? "" : `; did you mean ${JSON.stringify(suggestion)}?`)
  );
}
