import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { firstSyntaxErrorOffset, parseJson } from "../src/parse-json.ts";

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
    for (const text of ["{}", "[]", '"s"', "-0.5E+2", " null ", '{"a":{"b":[{}]}}', "[1,]", "{,}", "01", "\"\\x\""]) {
      let valid = true;
      try {
        JSON.parse(text);
      } catch {
        valid = false;
      }
      assert.equal(firstSyntaxErrorOffset(text) === undefined, valid, text);
    }
  });
});
