#!/usr/bin/env node
// Entry point of the `sluice` command. It registers tsx's loader first so that the CLI's own
// TypeScript sources and users' computation modules (`.ts`) load without a build step.
import { register } from "tsx/esm/api";

register();
const { main } = await import("../src/main.ts");
process.exitCode = await main(process.argv.slice(2));
