import { isAbsolute, join, resolve } from "node:path";
import { BENCH_DIR } from "./paths.ts";

export interface BenchOptions {
  /** Tiny counts and durations: keeps the suite working in CI, says nothing about speed. */
  readonly quick: boolean;
  /** Where results go; default bench/results.json. */
  readonly out: string;
  /** Only these groups (ids), in suite order; default all. */
  readonly only: readonly string[] | null;
}

export const USAGE = `usage: pnpm bench [--quick] [--out <file.json>] [--only <group>[,<group>...]]

  --quick   every group with tiny counts and durations (CI smoke; the figures mean nothing)
  --out     write results there instead of bench/results.json
  --only    run only these groups: local, controller, runtime, accuracy, scale, delivery, smooth, stream, keys`;

export function parseOptions(argv: readonly string[]): BenchOptions {
  let quick = false;
  let out = join(BENCH_DIR, "results.json");
  let only: string[] | null = null;
  for (let i = 0; i < argv.length; i++) {
    const arg = argv[i];
    const value = () => {
      const next = argv[++i];
      if (next === undefined || next.startsWith("--")) throw new UsageError(`${arg} needs a value`);
      return next;
    };
    if (arg === "--")
      continue; // what `pnpm bench -- --quick` passes through
    else if (arg === "--quick") quick = true;
    else if (arg === "--out") out = value();
    else if (arg?.startsWith("--out=")) out = arg.slice("--out=".length);
    else if (arg === "--only") only = value().split(",").filter(Boolean);
    else if (arg?.startsWith("--only=")) only = arg.slice("--only=".length).split(",").filter(Boolean);
    else if (arg === "--help" || arg === "-h") throw new UsageError("");
    else throw new UsageError(`unknown argument ${JSON.stringify(arg)}`);
  }
  return { quick, out: isAbsolute(out) ? out : resolve(process.cwd(), out), only };
}

export class UsageError extends Error {}
