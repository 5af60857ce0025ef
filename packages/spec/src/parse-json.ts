// The one JSON reader for specs: pipeline files in the CLI, dynamic_spec_json over gRPC. Values come
// from JSON.parse (V8's parser does not recurse, so any depth parses). Its errors name a position
// only for some mistakes ("Unexpected token '}', "…" is not valid JSON" has none), so on failure a
// strict RFC 8259 scanner finds the first character that cannot continue a JSON text. The scanner
// keeps its open brackets on an explicit stack instead of recursing: `[` repeated 200,000 times is
// located like any other mistake, never a RangeError.

export type JsonParseResult =
  | { ok: true; value: unknown }
  | {
      ok: false;
      /** 1-based, counted in the text without its byte-order mark. */
      line: number;
      /** 1-based, in UTF-16 code units from the start of the line. */
      column: number;
      /** 0-based index of the first character that cannot continue a JSON text. */
      offset: number;
      /** What is wrong, without a position (the caller reports line and column). */
      message: string;
    };

/** JSON.parse, or the line, column and reason of the first syntax error. A leading byte-order mark is ignored. */
export function parseJson(text: string): JsonParseResult {
  const source = text.startsWith("\uFEFF") ? text.slice(1) : text;
  try {
    return { ok: true, value: JSON.parse(source) };
  } catch (error) {
    const offset = firstSyntaxErrorOffset(source) ?? source.length;
    const { line, column } = lineAndColumn(source, offset);
    return { ok: false, line, column, offset, message: describeSyntaxError(error, source, offset) };
  }
}

/** 1-based line and column of `offset` in `text`. */
export function lineAndColumn(text: string, offset: number): { line: number; column: number } {
  let line = 1;
  let lineStart = 0;
  const end = Math.min(offset, text.length);
  for (let i = text.indexOf("\n"); i !== -1 && i < end; i = text.indexOf("\n", i + 1)) {
    line++;
    lineStart = i + 1;
  }
  return { line, column: offset - lineStart + 1 };
}

function describeSyntaxError(error: unknown, source: string, offset: number): string {
  const raw = error instanceof Error ? error.message : String(error);
  // Drop V8's own location and its echo of the document: the caller reports line and column.
  let message = raw
    .replace(/ at position \d+.*$/s, "")
    .replace(/ in JSON$/, "")
    .replace(/, ".*"(?:\.\.\.)? is not valid JSON$/s, "")
    .replace(/ \(line \d+ column \d+\)$/, "");
  const before = source.slice(Math.max(0, offset - 200), offset).trimEnd();
  const at = source[offset];
  if (before.endsWith(",") && (at === "}" || at === "]")) message += "; JSON allows no trailing comma";
  return message;
}

const NUMBER = /-?(?:0|[1-9]\d*)(?:\.\d+)?(?:[eE][+-]?\d+)?/y;
const HEX4 = /[0-9A-Fa-f]{4}/y;
const ESCAPES = new Set(['"', "\\", "/", "b", "f", "n", "r", "t"]);
const LITERALS: Readonly<Record<string, string>> = { t: "true", f: "false", n: "null" };

/** What the scanner expects next. */
const Expect = {
  Value: 0,
  /** A member name (after `{` with something in it, or after `,` in an object). */
  Key: 1,
  /** `,`, the closing bracket of the innermost container, or the end of the text. */
  AfterValue: 2,
} as const;

/** Offset of the first character that makes `text` invalid JSON, or undefined when it is valid. */
export function firstSyntaxErrorOffset(text: string): number | undefined {
  const closers: string[] = []; // the closing bracket of every open container, innermost last
  let pos = 0;
  let expect: (typeof Expect)[keyof typeof Expect] = Expect.Value;

  const skipWhitespace = () => {
    for (;;) {
      const char = text[pos];
      if (char !== " " && char !== "\t" && char !== "\n" && char !== "\r") return;
      pos++;
    }
  };

  /** Scans the string starting at `pos` (its opening quote); false with `pos` on the bad character. */
  const string = (): boolean => {
    pos++;
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

  for (;;) {
    skipWhitespace();
    const char = text[pos];
    if (expect === Expect.AfterValue) {
      const closer = closers.at(-1);
      if (closer === undefined) return pos < text.length ? pos : undefined;
      if (char === ",") {
        pos++;
        expect = closer === "}" ? Expect.Key : Expect.Value;
      } else if (char === closer) {
        pos++;
        closers.pop();
      } else return pos;
      continue;
    }
    if (expect === Expect.Key) {
      if (char !== '"' || !string()) return pos;
      skipWhitespace();
      if (text[pos] !== ":") return pos;
      pos++;
      expect = Expect.Value;
      continue;
    }
    // Expect.Value
    if (char === "{" || char === "[") {
      const closer = char === "{" ? "}" : "]";
      pos++;
      skipWhitespace();
      if (text[pos] === closer) {
        pos++;
        expect = Expect.AfterValue;
      } else {
        closers.push(closer);
        expect = char === "{" ? Expect.Key : Expect.Value;
      }
      continue;
    }
    if (char === '"') {
      if (!string()) return pos;
      expect = Expect.AfterValue;
      continue;
    }
    const literal = char === undefined ? undefined : LITERALS[char];
    if (literal !== undefined) {
      for (const expected of literal) {
        if (text[pos] !== expected) return pos;
        pos++;
      }
      expect = Expect.AfterValue;
      continue;
    }
    NUMBER.lastIndex = pos;
    if (!NUMBER.test(text)) return pos;
    pos = NUMBER.lastIndex;
    expect = Expect.AfterValue;
  }
}
