#!/usr/bin/env node
// Entry point of the `sluice` command. It registers tsx's loader first so that users' computation
// modules (`.ts`) load without a build step, and so do the CLI's own sources in this repository. Both hooks:
// a `.ts` file in a package without `"type": "module"` is CommonJS to Node, and loads only through
// tsx's CommonJS hook.
import { register } from "tsx/esm/api";
import { register as registerCommonJs } from "tsx/cjs/api";

register();
registerCommonJs();
// grpc-js sends the host of the controller's address as the TLS server name even when it is an IP
// address (127.0.0.1:7070), and Node then warns (DEP0123) on every TLS connection: about the
// library, not about anything the user could change. That warning alone is dropped.
const emitWarning = process.emitWarning;
process.emitWarning = (warning, ...rest) => {
  const code = typeof rest[0] === "object" && rest[0] !== null ? rest[0].code : rest[1];
  if (code === "DEP0123") return;
  return emitWarning.call(process, warning, ...rest);
};
// By the package's own name: its "exports" map "./main" to the TypeScript source in this repository
// and, in the packed package (publishConfig), to the compiled dist/main.js.
const { main } = await import("@sluice/cli/main");
process.exitCode = await main(process.argv.slice(2));
