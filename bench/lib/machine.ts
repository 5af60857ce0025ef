import { readFileSync } from "node:fs";
import { availableParallelism, cpus, loadavg, totalmem } from "node:os";
import type { Machine } from "./results.ts";

/** What the figures ran on: `nproc`, the CPU model from /proc/cpuinfo, Node's version. */
export function describeMachine(): Machine {
  return {
    nproc: availableParallelism(),
    cpuModel: cpuModel(),
    node: process.version,
    platform: `${process.platform} ${process.arch}`,
    memoryGiB: Math.round((totalmem() / 2 ** 30) * 10) / 10,
    loadAverageAtStart: Math.round((loadavg()[0] ?? 0) * 100) / 100,
  };
}

function cpuModel(): string {
  try {
    const match = /^model name\s*:\s*(.+)$/m.exec(readFileSync("/proc/cpuinfo", "utf8"));
    if (match?.[1]) return match[1].trim();
  } catch {
    // not Linux: fall back to what Node reports
  }
  return cpus()[0]?.model ?? "unknown";
}
