// `node scripts/test-batch.mjs FILE…`: runs several unit test files in one process, one after
// another, each inside a suite named by its path, so that its top-level hooks (`before`, `after`)
// stay its own and its time is reported. One process start and one load of the packages instead of
// one per file (scripts/run-test-files.mjs).
//
// With SLUICE_UNIT_BUILD set (the unit lane), each FILE is imported from its compiled module there
// (scripts/compile-unit-tests.mjs), which loads without tsx; otherwise from its source, through tsx.
import { describe } from "node:test";
import { join, resolve } from "node:path";
import { pathToFileURL } from "node:url";

const build = process.env.SLUICE_UNIT_BUILD;
for (const file of process.argv.slice(2)) {
  const module = build ? join(build, file.replace(/\.ts$/, ".js")) : file;
  describe(file, async () => {
    await import(pathToFileURL(resolve(module)).href);
  });
}
