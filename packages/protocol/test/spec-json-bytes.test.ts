import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { isSluiceError } from "@sluice/core";
import { quotaServiceDefinition } from "../src/index.ts";
import { firstInvalidUtf8Offset, lastLengthDelimitedField, specJsonEncodingProblem } from "../src/spec-json-bytes.ts";

/** An UpdateDynamicSpecRequest on the wire: field 1, length-delimited, holding `payload` as is. */
function updateRequest(payload: Buffer): Buffer {
  const length: number[] = [];
  for (let n = payload.length; ; n = Math.floor(n / 128)) {
    if (n < 128) {
      length.push(n);
      break;
    }
    length.push((n % 128) | 0x80);
  }
  return Buffer.concat([Buffer.from([0x0a, ...length]), payload]);
}

describe("dynamic_spec_json bytes", () => {
  it("finds the first byte that is not well-formed UTF-8", () => {
    const cases: [number[], number][] = [
      [[0x7b, 0x7d], -1],
      [[...Buffer.from('{"é€𝄞"}')], -1],
      [[0x7b, 0xff, 0x7d], 1],
      [[0x7b, 0xc0, 0xaf], 1], // overlong "/"
      [[0xe0, 0x80, 0xaf], 0], // overlong
      [[0xed, 0xa0, 0x80], 0], // a UTF-16 surrogate
      [[0xf4, 0x90, 0x80, 0x80], 0], // above U+10FFFF
      [[0x61, 0xe2, 0x82], 1], // cut short
      [[0x61, 0x80], 1], // a lone continuation byte
    ];
    for (const [bytes, offset] of cases) assert.equal(firstInvalidUtf8Offset(Uint8Array.from(bytes)), offset, Buffer.from(bytes).toString("hex"));
  });

  it("takes the last occurrence of the field and skips others", () => {
    const first = updateRequest(Buffer.from("first"));
    const other = Buffer.from([0x10, 0x96, 0x01, 0x1d, 1, 2, 3, 4]); // field 2 varint 150, field 3 fixed32
    const last = updateRequest(Buffer.from("last"));
    assert.equal(lastLengthDelimitedField(Buffer.concat([first, other, last]), 1)?.toString(), "last");
    assert.equal(lastLengthDelimitedField(Buffer.from([0x0a, 0x05, 0x61]), 1), undefined, "cut short");
    assert.equal(lastLengthDelimitedField(Buffer.alloc(0), 1), undefined);
  });

  it("refuses invalid UTF-8 with SPEC_INVALID and its line and column, and accepts valid text", () => {
    const text = Buffer.concat([Buffer.from('{\n  "throttlers": {"é'), Buffer.from([0xff]), Buffer.from('": {}}}')]);
    const problem = specJsonEncodingProblem(updateRequest(text));
    assert.ok(isSluiceError(problem, "SPEC_INVALID"));
    assert.equal(
      problem.message,
      "SPEC_INVALID: dynamic_spec_json is not valid UTF-8 at line 2, column 20 (byte 0xFF at byte offset 22); " +
        "send the spec as UTF-8 text; the controller's dynamic_spec is unchanged",
    );
    assert.deepEqual(problem.details, { line: 2, column: 20, byteOffset: 22 });
    assert.equal(specJsonEncodingProblem(updateRequest(Buffer.from('{"throttlers": {"é𝄞": {}}}'))), null);
    assert.equal(specJsonEncodingProblem(Buffer.alloc(0)), null, "an empty message has an empty string");
    // What protobufjs makes of the same bytes: some string, no error — hence the check.
    const decoded = quotaServiceDefinition().UpdateDynamicSpec.requestDeserialize(updateRequest(text));
    assert.equal(typeof decoded.dynamicSpecJson, "string");
  });
});
