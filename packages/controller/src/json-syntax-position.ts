/**
 * Where a JSON text first goes wrong, as ` at line L, column C` (1-based). Node 20's JSON.parse
 * names a position only for some errors ("Unexpected token '}', ... is not valid JSON" has none),
 * so this re-scans the text with a strict RFC 8259 reader that stops at the first bad character.
 * Only called after JSON.parse failed; returns "" if the scanner finds nothing wrong.
 */
export function jsonSyntaxPosition(text: string): string {
  const offset = firstErrorOffset(text);
  if (offset < 0) return "";
  const before = text.slice(0, offset);
  const line = before.split("\n").length;
  const column = offset - before.lastIndexOf("\n");
  return ` at line ${line}, column ${column}`;
}

class Stop {
  constructor(readonly offset: number) {}
}

const NUMBER = /-?(?:0|[1-9]\d*)(?:\.\d+)?(?:[eE][+-]?\d+)?/y;
const HEX4 = /^[0-9a-fA-F]{4}$/;

function firstErrorOffset(text: string): number {
  let i = 0;
  const fail = (): never => {
    throw new Stop(i);
  };
  const skipSpace = () => {
    while (i < text.length && (text[i] === " " || text[i] === "\t" || text[i] === "\n" || text[i] === "\r")) i += 1;
  };
  const string = () => {
    i += 1; // opening quote
    while (i < text.length) {
      const ch = text[i] ?? "";
      if (ch === '"') {
        i += 1;
        return;
      }
      if (ch === "\\") {
        i += 1;
        const escape = text[i] ?? "";
        if ('"\\/bfnrt'.includes(escape) && escape !== "") i += 1;
        else if (escape === "u" && HEX4.test(text.slice(i + 1, i + 5))) i += 5;
        else fail();
        continue;
      }
      if (ch < " ") fail();
      i += 1;
    }
    fail();
  };
  const value = (): void => {
    skipSpace();
    const ch = text[i];
    if (ch === "{") {
      i += 1;
      skipSpace();
      if (text[i] === "}") {
        i += 1;
        return;
      }
      for (;;) {
        skipSpace();
        if (text[i] !== '"') fail();
        string();
        skipSpace();
        if (text[i] !== ":") fail();
        i += 1;
        value();
        skipSpace();
        if (text[i] === ",") i += 1;
        else if (text[i] === "}") {
          i += 1;
          return;
        } else fail();
      }
    }
    if (ch === "[") {
      i += 1;
      skipSpace();
      if (text[i] === "]") {
        i += 1;
        return;
      }
      for (;;) {
        value();
        skipSpace();
        if (text[i] === ",") i += 1;
        else if (text[i] === "]") {
          i += 1;
          return;
        } else fail();
      }
    }
    if (ch === '"') return string();
    NUMBER.lastIndex = i;
    if (NUMBER.test(text)) {
      i = NUMBER.lastIndex;
      return;
    }
    for (const literal of ["true", "false", "null"]) {
      if (text.startsWith(literal, i)) {
        i += literal.length;
        return;
      }
    }
    fail();
  };
  try {
    value();
    skipSpace();
    if (i < text.length) fail();
    return -1;
  } catch (error) {
    if (error instanceof Stop) return error.offset;
    throw error;
  }
}
