import { dynamicSpecJsonSchema, pipelineJsonSchema } from "../../packages/spec/src/index.ts";
import { code, page, table } from "./markdown.ts";

// docs/reference/spec.md from zod's JSON Schema export (`sluice schema`): every field, its type,
// default, whether it is required, and the `.describe()` text of the schema.

type Schema = Readonly<Record<string, unknown>>;

export interface SpecField {
  readonly path: string;
  readonly type: string;
  readonly required: boolean;
  readonly defaultValue: string;
  readonly description: string;
}

const DURATION_PATTERN = "ms|s|m|h";

function asSchema(value: unknown): Schema | null {
  return value !== null && typeof value === "object" && !Array.isArray(value) ? (value as Schema) : null;
}

function schemas(value: unknown): Schema[] {
  if (!Array.isArray(value)) return [];
  return value.flatMap((v: unknown) => {
    const schema = asSchema(v);
    return schema ? [schema] : [];
  });
}

/** Every field of an object schema, depth first, in declaration order. */
export function specFields(root: Schema, prefix = ""): SpecField[] {
  const fields: SpecField[] = [];
  walk(root, prefix, fields, asSchema(root["$defs"]) ?? {});
  return merged(fields);
}

/**
 * One row per path: a field declared by several variants of a union (a throttler kind, say) is
 * listed once, with the types of all variants and each distinct description.
 */
function merged(fields: readonly SpecField[]): SpecField[] {
  const byPath = new Map<string, SpecField>();
  for (const field of fields) {
    const seen = byPath.get(field.path);
    if (!seen) {
      byPath.set(field.path, field);
      continue;
    }
    const join = (a: string, b: string, separator: string) => (a === b || b === "" ? a : a === "" ? b : `${a}${separator}${b}`);
    byPath.set(field.path, {
      path: field.path,
      type: join(seen.type, field.type, " or "),
      required: seen.required && field.required,
      defaultValue: join(seen.defaultValue, field.defaultValue, " / "),
      description: join(seen.description, field.description, " — "),
    });
  }
  return [...byPath.values()];
}

/** A `$ref` to `#/$defs/<name>` (zod emits one for schemas registered with an id) resolved. */
function resolved(schema: Schema, defs: Schema): Schema {
  const ref = schema["$ref"];
  if (typeof ref !== "string" || !ref.startsWith("#/$defs/")) return schema;
  const target = asSchema(defs[ref.slice("#/$defs/".length)]);
  return target ? { ...target, ...Object.fromEntries(Object.entries(schema).filter(([k]) => k !== "$ref")) } : schema;
}

function walk(raw: Schema, path: string, into: SpecField[], defs: Schema, depth = 0): void {
  // A recursive schema would walk for ever; no spec nests this deep.
  if (depth > 20) return;
  const schema = resolved(raw, defs);
  const properties = asSchema(schema["properties"]);
  const required = new Set(Array.isArray(schema["required"]) ? (schema["required"] as string[]) : []);
  if (properties) {
    for (const [name, value] of Object.entries(properties)) {
      const declared = asSchema(value);
      if (!declared) continue;
      const child = resolved(declared, defs);
      const childPath = path === "" ? name : `${path}.${name}`;
      into.push({
        path: childPath,
        type: typeOf(child),
        required: required.has(name),
        defaultValue: "default" in child ? JSON.stringify(child["default"]) : "",
        description: typeof child["description"] === "string" ? child["description"] : "",
      });
      walk(child, childPath, into, defs, depth + 1);
    }
  }
  const declaredEntries = asSchema(schema["additionalProperties"]);
  const entries = declaredEntries ? resolved(declaredEntries, defs) : null;
  if (entries) {
    // The entry of a map (a stream, a throttler) has a description of its own when it is an object.
    if (typeof entries["description"] === "string") {
      into.push({ path: `${path}.<name>`, type: typeOf(entries), required: false, defaultValue: "", description: entries["description"] });
    }
    walk(entries, `${path}.<name>`, into, defs, depth + 1);
  }
  const items = asSchema(schema["items"]);
  if (items) walk(items, `${path}[]`, into, defs, depth + 1);
  for (const variant of [...schemas(schema["anyOf"]), ...schemas(schema["oneOf"])]) walk(variant, path, into, defs, depth + 1);
}

/** A short type: `integer ≥ 1`, `duration`, `"json" \| "string"`, `string[]`, `map of object`. */
export function typeOf(schema: Schema): string {
  const variants = [...schemas(schema["anyOf"]), ...schemas(schema["oneOf"])];
  if (variants.length > 0) {
    const isDuration =
      variants.some((v) => typeof v["pattern"] === "string" && v["pattern"].includes(DURATION_PATTERN)) && variants.some((v) => v["type"] === "integer");
    if (isDuration) return 'duration ("500ms", "1.5s", "2m", "1h" or integer ms)';
    return [...new Set(variants.map(typeOf))].join(" or ");
  }
  if (Array.isArray(schema["enum"])) return schema["enum"].map((v) => JSON.stringify(v)).join(" or ");
  const type = schema["type"];
  if (type === "array") {
    const items = asSchema(schema["items"]);
    const min = typeof schema["minItems"] === "number" ? ` (at least ${schema["minItems"]})` : "";
    return `${items ? typeOf(items) : "any"}[]${min}`;
  }
  if (type === "object") {
    const entries = asSchema(schema["additionalProperties"]);
    return entries && !schema["properties"] ? `map of ${typeOf(entries)}` : "object";
  }
  if (type === "number" || type === "integer") return `${type}${bounds(schema)}`;
  if (type === "string") return `string${stringBounds(schema)}`;
  return typeof type === "string" ? type : "any";
}

function bounds(schema: Schema): string {
  const parts: string[] = [];
  if (typeof schema["minimum"] === "number") parts.push(`≥ ${schema["minimum"]}`);
  if (typeof schema["exclusiveMinimum"] === "number") parts.push(`> ${schema["exclusiveMinimum"]}`);
  if (typeof schema["maximum"] === "number" && schema["maximum"] < Number.MAX_SAFE_INTEGER) parts.push(`≤ ${schema["maximum"]}`);
  if (typeof schema["exclusiveMaximum"] === "number") parts.push(`< ${schema["exclusiveMaximum"]}`);
  return parts.length > 0 ? ` ${parts.join(", ")}` : "";
}

function stringBounds(schema: Schema): string {
  const parts: string[] = [];
  if (typeof schema["minLength"] === "number" && schema["minLength"] > 1) parts.push(`at least ${schema["minLength"]} characters`);
  if (typeof schema["minLength"] === "number" && schema["minLength"] === 1) parts.push("non-empty");
  if (typeof schema["maxLength"] === "number") parts.push(`at most ${schema["maxLength"]} characters`);
  if (typeof schema["pattern"] === "string") parts.push(`matching ${code(schema["pattern"])}`);
  return parts.length > 0 ? ` (${parts.join(", ")})` : "";
}

function fieldTable(fields: readonly SpecField[]): string {
  return table(
    ["field", "type", "required", "default", "description"],
    fields.map((f) => [code(f.path), f.type, f.required ? "yes" : "", f.defaultValue === "" ? "" : code(f.defaultValue), f.description]),
  );
}

/** The fields under `section` (the section itself first), or the top-level scalar fields for "". */
function section(fields: readonly SpecField[], name: string): SpecField[] {
  return fields.filter((f) => f.path === name || f.path.startsWith(`${name}.`));
}

export function specReferencePage(): string {
  const pipeline = pipelineJsonSchema();
  const fields = specFields(pipeline);
  const topLevel = Object.keys(asSchema(pipeline["properties"]) ?? {});
  const scalars = fields.filter((f) => topLevel.includes(f.path) && !fields.some((g) => g.path.startsWith(`${f.path}.`)));
  const sections = topLevel.filter((name) => !scalars.some((f) => f.path === name));
  const dynamicTop = Object.keys(asSchema(dynamicSpecJsonSchema()["properties"]) ?? {});
  return page("Pipeline spec reference", [
    [
      "A pipeline spec is one JSON file (`sluice validate <spec.json>` checks it, `sluice schema` prints its",
      "JSON Schema for editors). This page lists every field the schema accepts, with the description the",
      "schema carries. `<name>` stands for a key you choose (a stream, computation, throttler or class id);",
      '`[]` for an element of an array. Durations are a string with a unit (`"500ms"`, `"1.5s"`, `"2m"`,',
      '`"1h"`) or whole milliseconds. Cross-references (a computation\'s input names a declared stream, a',
      "throttler id is declared, …) are checked by `sluice validate`, not by the JSON Schema.",
    ].join("\n"),
    `Top-level description: ${typeof pipeline["description"] === "string" ? pipeline["description"] : "(none)"}`,
    "## Top-level fields",
    fieldTable(scalars),
    ...sections.flatMap((name) => [`## \`${name}\``, fieldTable(section(fields, name))]),
    "## `sluice reconfigure` input",
    [
      "`sluice reconfigure` accepts a whole pipeline spec or a bare dynamic_spec (`sluice schema --dynamic-spec`):",
      `an object with the fields ${dynamicTop.map((n) => code(n)).join(", ")}, exactly as under \`dynamic_spec\` above.`,
    ].join("\n"),
  ]);
}
