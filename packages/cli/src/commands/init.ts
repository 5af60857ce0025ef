import { existsSync, mkdirSync, readdirSync, readFileSync, statSync, writeFileSync } from "node:fs";
import { basename, dirname, join, resolve } from "node:path";
import { EXIT_FAILURE, EXIT_OK, type CommandRegistration } from "../cli.ts";
import { projectFiles } from "../init/project-files.ts";

export const registerInit: CommandRegistration = (program, cli) => {
  program
    .command("init")
    .description("scaffold a project in <dir>: package.json on the published packages, a pipeline spec with a throttler, a TypeScript computation, a README")
    .argument("<dir>", "directory to create (it may exist if it is empty)")
    .action((dir: string) => {
      const target = resolve(dir);
      if (existsSync(target)) {
        if (!statSync(target).isDirectory()) {
          cli.stderr(`sluice init: ${target} exists and is not a directory; choose another <dir>\n`);
          cli.setExitCode(EXIT_FAILURE);
          return;
        }
        const entries = readdirSync(target);
        if (entries.length > 0) {
          const shown = entries.slice(0, 5).join(", ") + (entries.length > 5 ? `, … (${entries.length} entries)` : "");
          cli.stderr(`sluice init: ${target} is not empty (${shown}); nothing was written. Choose a new or empty <dir>\n`);
          cli.setExitCode(EXIT_FAILURE);
          return;
        }
      }
      const files = projectFiles({ name: packageName(basename(target)), sluiceRange: `^${cliVersion()}` });
      for (const [path, content] of Object.entries(files)) {
        const file = join(target, path);
        mkdirSync(dirname(file), { recursive: true });
        writeFileSync(file, content);
      }
      // As the user typed it, so that the `cd` line works from where they are.
      const shown = dir;
      cli.stdout(`created ${shown}: ${Object.keys(files).join(", ")}\n\n  cd ${shown}\n  npm install\n  npm start\n`);
      cli.setExitCode(EXIT_OK);
    });
};

/** npm names are lower case, URL-safe; a directory called "My Pipeline" becomes "my-pipeline". */
function packageName(dirName: string): string {
  const name = dirName
    .toLowerCase()
    .replace(/[^a-z0-9._-]+/g, "-")
    .replace(/^[._-]+|[-]+$/g, "");
  return name || "sluice-pipeline";
}

/** This CLI's version (src/ and dist/ both sit beside package.json): the scaffold depends on it. */
function cliVersion(): string {
  const manifest = JSON.parse(readFileSync(new URL("../../package.json", import.meta.url), "utf8")) as { version?: unknown };
  return typeof manifest.version === "string" ? manifest.version : "0.1.0";
}
