// `node --import ./test/support/use-built-packages.mjs …`: the process loads the workspace packages
// from their compiled dist/ (`pnpm build`) instead of their TypeScript sources, however they are
// named (package name or a path into packages/<pkg>/src/). The end-to-end lane runs its test files
// this way, and children that import package sources by path (CHILD_NODE_FLAGS in
// test/support/processes.ts). The hooks run on a thread of their own that answers every import: a
// child that names packages only by name is cheaper started with `--conditions=sluice-built`.
import { register } from "node:module";

register("./built-packages-hooks.mjs", import.meta.url);
