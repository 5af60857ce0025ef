import { dirname, join, resolve } from "node:path";
import { fileURLToPath } from "node:url";

export const BENCH_DIR = resolve(dirname(fileURLToPath(import.meta.url)), "..");
export const ROOT = resolve(BENCH_DIR, "..");
export const CHILDREN_DIR = join(BENCH_DIR, "children");
