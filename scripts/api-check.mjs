#!/usr/bin/env node
// `pnpm api:check`: the public surface of every publishable package, as API Extractor reads it from
// the declarations `pnpm build` wrote into dist/, compared with the report committed beside the
// package (packages/<pkg>/etc/<pkg>.api.md; an `exports` entry other than "." gets its own report,
// e.g. protocol-testing.api.md). It fails when a surface changed and its report was not updated, so
// a change of what users may import shows in review. `pnpm api:update` rewrites the reports.
// Run `pnpm build` first (CI runs this after the end-to-end lane built dist/).
import { existsSync, mkdirSync, readFileSync } from "node:fs";
import { join, resolve } from "node:path";
import { fileURLToPath } from "node:url";
import { CompilerState, Extractor, ExtractorConfig } from "@microsoft/api-extractor";
import { publishablePackages } from "./publishable-packages.mjs";

const root = resolve(fileURLToPath(import.meta.url), "../..");
const update = process.argv.includes("--update");

/** One API Extractor run per entry of the package's exports map: [report name, dist/ entry .d.ts]. */
function entryPoints(pkg) {
  const manifest = JSON.parse(readFileSync(join(pkg.dir, "package.json"), "utf8"));
  const exportsMap = manifest.publishConfig?.exports ?? {};
  const base = pkg.name.replace(/^@sluice\//, "");
  return Object.entries(exportsMap).map(([subpath, target]) => {
    const suffix = subpath === "." ? "" : `-${subpath.slice(2).replaceAll("/", "-")}`;
    return [`${base}${suffix}`, join(pkg.dir, target.types)];
  });
}

const problems = [];
let checked = 0;
/** Every report's prepared configuration, checked against one TypeScript program below. */
const runs = [];
for (const pkg of publishablePackages(root)) {
  for (const [report, entry] of entryPoints(pkg)) {
    if (!existsSync(entry)) {
      problems.push(`${pkg.name}: ${entry.slice(root.length + 1)} does not exist: run \`pnpm build\` first`);
      continue;
    }
    mkdirSync(join(pkg.dir, "etc"), { recursive: true });
    const config = ExtractorConfig.prepare({
      configObjectFullPath: join(pkg.dir, "api-extractor.json"),
      packageJsonFullPath: join(pkg.dir, "package.json"),
      configObject: {
        projectFolder: pkg.dir,
        mainEntryPointFilePath: entry,
        compiler: {
          overrideTsconfig: {
            compilerOptions: {
              target: "ES2023",
              lib: ["ES2023"],
              module: "NodeNext",
              moduleResolution: "NodeNext",
              strict: true,
              exactOptionalPropertyTypes: true,
              allowImportingTsExtensions: true,
              noEmit: true,
              skipLibCheck: true,
              types: ["node"],
            },
            include: [entry],
          },
        },
        apiReport: {
          enabled: true,
          reportFileName: `${report}.api.md`,
          reportFolder: join(pkg.dir, "etc"),
          reportTempFolder: join(root, "dist/api-extractor", report),
        },
        docModel: { enabled: false },
        dtsRollup: { enabled: false },
        tsdocMetadata: { enabled: false },
        messages: {
          compilerMessageReporting: { default: { logLevel: "warning" } },
          // Documentation-comment style is not what this check is about.
          tsdocMessageReporting: { default: { logLevel: "none" } },
          extractorMessageReporting: {
            default: { logLevel: "warning" },
            // Release tags (@public/@beta) are not used: everything exported is public.
            "ae-missing-release-tag": { logLevel: "none" },
            // A type the surface uses but does not export is listed in the report instead of failing.
            "ae-forgotten-export": { logLevel: "none", addToApiReportFile: true },
            // A missing doc comment is marked "(undocumented)" in the report; not a failure here.
            "ae-undocumented": { logLevel: "none", addToApiReportFile: false },
            // Other workspace packages resolve to their TypeScript sources (their development
            // "exports"); they are external here and only named in the report's imports.
            "ae-wrong-input-file-type": { logLevel: "none" },
          },
        },
      },
    });
    runs.push({ pkg, report, entry, config });
  }
}

// One TypeScript program for every entry point (the compiler options are the same for all): each
// report is read from it instead of compiling the declarations of the workspace once per report.
const first = runs[0];
const compilerState = first ? CompilerState.create(first.config, { additionalEntryPoints: runs.slice(1).map((run) => run.entry) }) : undefined;
for (const { pkg, report, config } of runs) {
  const result = Extractor.invoke(config, { localBuild: update, showVerboseMessages: false, messageCallback: quiet, compilerState });
  checked++;
  if (!result.succeeded) {
    problems.push(
      result.apiReportChanged
        ? `${pkg.name}: the public surface differs from etc/${report}.api.md; if the change is meant, run \`pnpm api:update\` and commit the report (the diff: dist/api-extractor/${report}/${report}.api.md)`
        : `${pkg.name} (${report}): API Extractor failed with ${result.errorCount} errors; they are above`,
    );
  }
}

/** Prints warnings and errors only, with the package they belong to. */
function quiet(message) {
  message.handled = true;
  if (message.logLevel === "warning" || message.logLevel === "error") {
    const where = message.sourceFilePath ? `${message.sourceFilePath.replace(`${root}/`, "")}:${message.sourceFileLine ?? "?"}: ` : "";
    console.error(`${message.logLevel}: ${where}${message.text} (${message.messageId})`);
  }
}

if (problems.length > 0) {
  console.error(`\n${problems.join("\n")}`);
  process.exit(1);
}
console.log(`${checked} public surfaces ${update ? "written to" : "match"} packages/*/etc/*.api.md`);
