// JSON.parse with the line and column of a syntax error. V8 gives a character position for most
// errors but not all ("Unexpected token '}', "…" is not valid JSON" has none), so the position comes
// from a small scanner that stops at the first character that cannot continue a JSON document.

export type JsonParseResult =
  | { ok: true; value: unknown }
  | { ok: false; line: number; column: number; message: string };

export function parseJson(text: string): JsonParseResult {
  const source = text.startsWith("\uFEFF") ? text.slice(1) : text;
  try {
    return { ok: true, value: JSON.parse(source) };
  } catch (error) {
    const offset = firstSyntaxErrorOffset(source) ?? source.length;
    const { line, column } = lineAndColumn(source, offset);
    return { ok: false, line, column, message: describeSyntaxError(error, source, offset) };
  }
}

function describeSyntaxError(error: unknown, source: string, offset: number): string {
  const raw = error instanceof Error ? error.message : String(error);
  // Drop V8's own location and echo of the document: the caller reports line and column.
  let message = raw
    .replace(/ at position \d+.*$/s, "")
    .replace(/ in JSON$/, "")
    .replace(/, ".*" is not valid JSON$/s, "")
    .replace(/ \(line \d+ column \d+\)$/, "");
  const before = source.slice(0, offset).trimEnd();
  const at = source[offset];
  if (before.endsWith(",") && (at === "}" || at === "]")) message += " (JSON allows no trailing comma)";
  return message;
}

function lineAndColumn(text: string, offset: number): { line: number; column: number } {
  let line = 1;
  let lineStart = 0;
  for (let i = 0; i < offset && i < text.length; i++) {
    if (text[i] === "\n") {
      line++;
      lineStart = i + 1;
    }
  }
  return { line, column: offset - lineStart + 1 };
}

const NUMBER = /-?(?:0|[1-9]\d*)(?:\.\d+)?(?:[eE][+-]?\d+)?/y;
const ESCAPES = new Set(['"', "\\", "/", "b", "f", "n", "r", "t"]);
const HEX4 = /[0-9A-Fa-f]{4}/y;

/** Offset of the first character that makes `text` invalid JSON, or undefined when it is valid. */
export function firstSyntaxErrorOffset(text: string): number | undefined {
  let pos = 0;

  const skipWhitespace = () => {
    while (pos < text.length && " \t\n\r".includes(text[pos] ?? "")) pos++;
  };

  const literal = (word: string): boolean => {
    for (const char of word) {
      if (text[pos] !== char) return false;
      pos++;
    }
    return true;
  };

  const string = (): boolean => {
    pos++; // opening quote
    while (pos < text.length) {
      const char = text[pos] ?? "";
      if (char === '"') {
        pos++;
        return true;
      }
      if (char < " ") return false;
      if (char === "\\") {
        const escaped = text[pos + 1] ?? "";
        if (ESCAPES.has(escaped)) {
          pos += 2;
          continue;
        }
        if (escaped !== "u") {
          pos++;
          return false;
        }
        HEX4.lastIndex = pos + 2;
        if (!HEX4.test(text)) {
          pos += 2;
          return false;
        }
        pos += 6;
        continue;
      }
      pos++;
    }
    return false;
  };

  const container = (close: "}" | "]"): boolean => {
    pos++; // opening bracket
    skipWhitespace();
    if (text[pos] === close) {
      pos++;
      return true;
    }
    for (;;) {
      skipWhitespace();
      if (close === "}") {
        if (text[pos] !== '"' || !string()) return false;
        skipWhitespace();
        if (text[pos] !== ":") return false;
        pos++;
      }
      if (!value()) return false;
      skipWhitespace();
      if (text[pos] === ",") {
        pos++;
        continue;
      }
      if (text[pos] !== close) return false;
      pos++;
      return true;
    }
  };

  const value = (): boolean => {
    skipWhitespace();
    const char = text[pos];
    if (char === "{") return container("}");
    if (char === "[") return container("]");
    if (char === '"') return string();
    if (char === "t") return literal("true");
    if (char === "f") return literal("false");
    if (char === "n") return literal("null");
    NUMBER.lastIndex = pos;
    if (!NUMBER.test(text)) return false;
    pos = NUMBER.lastIndex;
    return true;
  };

  if (!value()) return Math.min(pos, text.length);
  skipWhitespace();
  return pos < text.length ? pos : undefined;
}
