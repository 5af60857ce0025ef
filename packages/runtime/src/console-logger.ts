import type { Logger } from "./computation.ts";

/** Lines to stderr with a prefix; the CLI's default logger. */
export function consoleLogger(prefix: string): Logger {
  const line = (level: string, message: string) => process.stderr.write(`${new Date().toISOString()} ${level} ${prefix}: ${message}\n`);
  return {
    info: (message) => line("INFO", message),
    warn: (message) => line("WARN", message),
    error: (message) => line("ERROR", message),
  };
}
