// `node --import ./test/support/use-built-packages.mjs …`: the process loads the workspace packages
// from their compiled dist/ (`pnpm build`) instead of their TypeScript sources. The end-to-end lane
// starts its `sluice` children this way (test/support/processes.ts), so that each child does not
// compile the whole CLI through tsx on start; the test files themselves still run from sources.
import { register } from "node:module";

register("./built-packages-hooks.mjs", import.meta.url);
