import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { resolve } from "node:path";
import { fileURLToPath } from "node:url";
import { describe, it } from "node:test";
import { ERROR_CODES, SLUICE_ERROR_CODES, type SluiceErrorCode } from "@sluice/core";
import { GRPC_STATUS_BY_CODE, grpcStatusName } from "../src/index.ts";

// The README's `## Error codes` table is what users read; core's ERROR_CODES and protocol's status
// table are what the code does. This keeps the three in step.

const readmePath = resolve(fileURLToPath(import.meta.url), "../../../../README.md");

interface Row {
  readonly code: string;
  readonly grpcStatus: string;
  readonly retriable: string;
  readonly quotaConsumed: string;
}

function errorCodeRows(markdown: string): Row[] {
  const section = /^## Error codes\n([\s\S]*?)(?=^## |(?![\s\S]))/m.exec(markdown)?.[1];
  assert.ok(section, "README.md has a `## Error codes` section");
  const lines = section.split("\n").filter((line) => line.startsWith("|"));
  const cells = (line: string) => line.slice(1, -1).split("|").map((cell) => cell.trim());
  assert.deepEqual(cells(lines[0] ?? ""), ["code", "gRPC status", "retriable", "quota consumed"], "table header");
  return lines.slice(2).map((line) => {
    const [code = "", grpcStatus = "", retriable = "", quotaConsumed = ""] = cells(line);
    return { code, grpcStatus, retriable, quotaConsumed };
  });
}

describe("README error-code table", () => {
  const rows = errorCodeRows(readFileSync(readmePath, "utf8"));

  it("lists every code exactly once, and nothing else", () => {
    const listed = rows.map((row) => /^`([A-Z_]+)`/.exec(row.code)?.[1]);
    assert.deepEqual([...listed].sort(), [...SLUICE_ERROR_CODES].sort());
  });

  for (const row of rows) {
    const code = /^`([A-Z_]+)`/.exec(row.code)?.[1] as SluiceErrorCode;
    it(`${code}: status, retriable and quota consumed match the code`, () => {
      const status = GRPC_STATUS_BY_CODE[code];
      assert.equal(row.grpcStatus, status === null ? "—" : grpcStatusName(status), "gRPC status");
      const retriable = /^(yes|no)\b/.exec(row.retriable)?.[1];
      assert.equal(retriable, ERROR_CODES[code].retriable ? "yes" : "no", `retriable column "${row.retriable}"`);
      assert.equal(row.quotaConsumed, ERROR_CODES[code].quotaConsumed, "quota consumed");
    });
  }
});
