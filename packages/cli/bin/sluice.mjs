#!/usr/bin/env node
// Entry point of the `sluice` command. Users' computation modules (`.ts`) load without a build step
// through tsx's loaders. Registering them costs a good part of a start's CPU and slows every module
// loaded after them, so they are registered only when needed: before the CLI's own sources when
// `@sluice/cli/main` is TypeScript (this repository), and otherwise just before the first module a
// spec names is imported (the CLI calls `beforeSpecModules`). Both hooks: a `.ts` file in a package
// without `"type": "module"` is CommonJS to Node, and loads only through tsx's CommonJS hook.

// grpc-js sends the host of the controller's address as the TLS server name even when it is an IP
// address (127.0.0.1:7070), and Node then warns (DEP0123) on every TLS connection: about the
// library, not about anything the user could change. That warning alone is dropped.
const emitWarning = process.emitWarning;
process.emitWarning = (warning, ...rest) => {
  const code = typeof rest[0] === "object" && rest[0] !== null ? rest[0].code : rest[1];
  if (code === "DEP0123") return;
  return emitWarning.call(process, warning, ...rest);
};

/** How long the process may take to end by itself once the command has finished. */
const EXIT_GRACE_MS = 2_000;

let typescript;
/** Registers tsx once; later calls wait for the same registration. */
const enableTypeScript = () => {
  typescript ??= Promise.all([import("tsx/esm/api"), import("tsx/cjs/api")]).then(([esm, commonJs]) => {
    esm.register();
    commonJs.register();
  });
  return typescript;
};

// By the package's own name: its "exports" map "./main" to the TypeScript source in this repository
// and, in the packed package (publishConfig), to the compiled dist/main.js.
const entry = import.meta.resolve("@sluice/cli/main");
if (/\.[cm]?tsx?$/.test(new URL(entry).pathname)) await enableTypeScript();
const { main } = await import(entry);
process.exitCode = await main(process.argv.slice(2), undefined, { beforeSpecModules: enableTypeScript });
// Every command has closed what it opened once main() resolves, so the process should end now. A
// handle a library left behind must not keep it alive: kafkajs can keep a broker connection it
// reopened on a Broker object it had already dropped from its pool (after the broker restarted), and
// `sluice controller` then printed "stopped" and never exited. The timer does not hold the process.
// Output still queued for a slow reader of a pipe is waited for: process.exit() would cut its tail.
const exitIfStillRunning = () => {
  if (process.stdout.writableLength > 0 || process.stderr.writableLength > 0) {
    setTimeout(exitIfStillRunning, 100).unref();
    return;
  }
  process.stderr.write(`sluice: still running ${EXIT_GRACE_MS} ms after it finished (a handle left open); exiting\n`);
  process.exit();
};
setTimeout(exitIfStillRunning, EXIT_GRACE_MS).unref();
