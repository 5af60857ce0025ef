// `node --import tsx scripts/test-batch.mjs FILE…`: runs several unit test files in one process, one
// after another, each inside a suite named by its path, so that its top-level hooks (`before`,
// `after`) stay its own and its time is reported. One process start, one load of the packages
// (through tsx, a second or two of CPU each), instead of one per file (scripts/run-test-files.mjs).
import { describe } from "node:test";
import { resolve } from "node:path";
import { pathToFileURL } from "node:url";

for (const file of process.argv.slice(2)) {
  describe(file, async () => {
    await import(pathToFileURL(resolve(file)).href);
  });
}
