import { readFileSync } from "node:fs";
import { createRequire } from "node:module";
import { join } from "node:path";
import { BENCH_DIR, ROOT } from "./paths.ts";

const require = createRequire(join(BENCH_DIR, "package.json"));

/** The installed version of a package the bench depends on (peers are pinned in bench/package.json). */
export function installedVersion(name: string): string {
  try {
    const manifest = require.resolve(`${name}/package.json`);
    return (JSON.parse(readFileSync(manifest, "utf8")) as { version: string }).version;
  } catch {
    // packages whose exports hide package.json (p-throttle): read it from node_modules directly
    try {
      return (JSON.parse(readFileSync(join(BENCH_DIR, "node_modules", name, "package.json"), "utf8")) as { version: string }).version;
    } catch {
      return "not installed";
    }
  }
}

export function sluiceVersion(): string {
  return (JSON.parse(readFileSync(join(ROOT, "packages/core/package.json"), "utf8")) as { version: string }).version;
}

export function peerVersions(): Record<string, string> {
  return {
    sluice: sluiceVersion(),
    "p-throttle": installedVersion("p-throttle"),
    "rate-limiter-flexible": installedVersion("rate-limiter-flexible"),
    bottleneck: installedVersion("bottleneck"),
    kafkajs: installedVersion("kafkajs"),
    "@grpc/grpc-js": installedVersion("@grpc/grpc-js"),
  };
}
