import assert from "node:assert/strict";
import { describe, it } from "node:test";
import fc from "fast-check";
import { firstSyntaxErrorOffset, lineAndColumn, parseJson } from "../src/index.ts";

describe("parseJson", () => {
  it("parses valid JSON, ignoring a byte-order mark", () => {
    assert.deepEqual(parseJson('\uFEFF{"a": [1, 2.5e3, true, null, "x\\u00e9"]}'), {
      ok: true,
      value: { a: [1, 2500, true, null, "xé"] },
    });
  });

  const broken: readonly [string, string, number, number][] = [
    ["trailing comma in an object", '{\n  "a": 1,\n}', 3, 1],
    ["trailing comma in an array", "[1,\n 2,\n]", 3, 1],
    ["missing comma", '{"a": 1\n "b": 2}', 2, 2],
    ["single quotes", "{'a': 1}", 1, 2],
    ["a misspelt literal", '{"a": tru}', 1, 10],
    ["a comment", '{\n  // note\n  "a": 1\n}', 2, 3],
    ["a truncated document", '{"a": [1, 2', 1, 12],
    ["an empty file", "", 1, 1],
    ["a second value", '{"a": 1} {"b": 2}', 1, 10],
    ["a leading zero", '{"a": 01}', 1, 8],
    ["a raw newline in a string", '{"a": "x\ny"}', 1, 9],
    ["a missing value", '{"a": }', 1, 7],
    ["an unknown escape", '"\\x"', 1, 3],
    ["a short unicode escape", '["\\u12"]', 1, 5],
    ["text after the document", "{} x", 1, 4],
    ["a bare minus", "[-]", 1, 2],
    ["a BOM-less line break in CRLF text", '{\r\n  "a": 1,\r\n}', 3, 1],
  ];

  for (const [name, text, line, column] of broken) {
    it(`locates ${name} at line ${line}, column ${column}`, () => {
      const result = parseJson(text);
      assert.ok(!result.ok);
      assert.deepEqual({ line: result.line, column: result.column }, { line, column });
      assert.notEqual(result.message, "");
      assert.doesNotMatch(result.message, /at position/);
    });
  }

  it("agrees with JSON.parse about validity", () => {
    for (const text of ["{}", "[]", '"s"', "-0.5E+2", " null ", '{"a":{"b":[{}]}}', "[1,]", "{,}", "01", '"\\x"']) {
      let valid = true;
      try {
        JSON.parse(text);
      } catch {
        valid = false;
      }
      assert.equal(firstSyntaxErrorOffset(text) === undefined, valid, text);
    }
  });

  it("locates errors in documents nested 200,000 deep without overflowing the stack", () => {
    const depth = 200_000;
    const cases: [string, number][] = [
      ["[".repeat(depth), depth + 1],
      ['{"a":'.repeat(depth), 5 * depth + 1],
      [`${"[".repeat(depth)}}`, depth + 1],
      // Closed all but the outermost object: the error is the end of the text.
      [`${'{"a":['.repeat(depth)}1${"]}".repeat(depth - 1)}]`, 8 * depth + 1],
    ];
    for (const [text, column] of cases) {
      const result = parseJson(text);
      assert.ok(!result.ok);
      assert.deepEqual({ line: result.line, column: result.column }, { line: 1, column });
    }
    const deepValid = `${"[".repeat(depth)}${"]".repeat(depth)}`;
    assert.equal(parseJson(deepValid).ok, true);
    assert.equal(firstSyntaxErrorOffset(deepValid), undefined);
  });

  it("counts lines and columns from the start of the text", () => {
    assert.deepEqual(lineAndColumn("ab\ncd\n\nef", 0), { line: 1, column: 1 });
    assert.deepEqual(lineAndColumn("ab\ncd\n\nef", 4), { line: 2, column: 2 });
    assert.deepEqual(lineAndColumn("ab\ncd\n\nef", 6), { line: 3, column: 1 });
    assert.deepEqual(lineAndColumn("ab\ncd\n\nef", 9), { line: 4, column: 3 });
  });

  it("agrees with JSON.parse on random JSON and on random damage to it", () => {
    const damaged = fc
      .tuple(fc.json(), fc.nat(), fc.constantFrom("", ",", "}", "]", "[", "{", ":", '"', "\\", "\n", "\u0001", "x", "0", "-", "e", " "), fc.nat(3))
      .map(([text, at, insert, cut]) => {
        const i = text.length === 0 ? 0 : at % (text.length + 1);
        return text.slice(0, i) + insert + text.slice(i + cut);
      });
    fc.assert(
      fc.property(fc.oneof(fc.json(), damaged), (text) => {
        let valid = true;
        try {
          JSON.parse(text);
        } catch {
          valid = false;
        }
        assert.equal(firstSyntaxErrorOffset(text) === undefined, valid, JSON.stringify(text));
      }),
      { numRuns: 2_000 },
    );
  });
});
