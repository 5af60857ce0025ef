#!/usr/bin/env node
// Entry point of the `sluice` command. It registers tsx's loader first so that the CLI's own
// TypeScript sources and users' computation modules (`.ts`) load without a build step. Both hooks:
// a `.ts` file in a package without `"type": "module"` is CommonJS to Node, and loads only through
// tsx's CommonJS hook.
import { register } from "tsx/esm/api";
import { register as registerCommonJs } from "tsx/cjs/api";

register();
registerCommonJs();
const { main } = await import("../src/main.ts");
process.exitCode = await main(process.argv.slice(2));
