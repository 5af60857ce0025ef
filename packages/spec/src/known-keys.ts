import * as z from "zod";

/**
 * The keys an object schema accepts at `path` inside `root`, for "did you mean" hints on unknown keys.
 * Zod reports an unknown key with the object's path only, so the object's schema is found again by
 * walking the path through objects, records and arrays, looking through wrappers (defaults,
 * optional, nullable, the input side of a pipe).
 */
export function knownKeysAt(root: z.core.$ZodType, path: readonly PropertyKey[]): string[] {
  let schema: z.core.$ZodType | undefined = unwrap(root);
  for (const segment of path) {
    if (schema instanceof z.ZodObject) schema = schema.shape[String(segment)];
    else if (schema instanceof z.ZodRecord) schema = schema.valueType;
    else if (schema instanceof z.ZodArray) schema = schema.element;
    else return [];
    schema = schema === undefined ? undefined : unwrap(schema);
  }
  return schema instanceof z.ZodObject ? Object.keys(schema.shape) : [];
}

function unwrap(schema: z.core.$ZodType): z.core.$ZodType {
  let current = schema;
  for (;;) {
    if (current instanceof z.ZodPrefault || current instanceof z.ZodDefault || current instanceof z.ZodOptional || current instanceof z.ZodNullable) {
      current = current.unwrap();
    } else if (current instanceof z.ZodPipe) {
      current = current.in;
    } else {
      return current;
    }
  }
}
