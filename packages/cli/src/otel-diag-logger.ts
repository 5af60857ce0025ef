import type { DiagLogger } from "@opentelemetry/api";

/** The same problem is printed at most once per this many milliseconds. */
export const DIAG_REPEAT_MS = 60_000;

/**
 * OpenTelemetry's own complaints (an unreachable collector, a refused export) as one readable line
 * each, saying `where` the spans go. The SDK reports a failed export as a JSON-serialized error, every batch, from every
 * tracer provider; this prints its message once and then at most once a minute, with a count.
 */
export function otelDiagLogger(write: (line: string) => void, where: string, now: () => number = Date.now): DiagLogger {
  const last = new Map<string, { at: number; suppressed: number }>();
  const log =
    (level: string) =>
    (message: string, ...args: unknown[]) => {
      const text = [readable(message), ...args.map(readable)].filter((part) => part !== "").join(" ");
      const seen = last.get(text);
      const at = now();
      if (seen && at - seen.at < DIAG_REPEAT_MS) {
        seen.suppressed += 1;
        return;
      }
      const repeats = seen && seen.suppressed > 0 ? ` (${seen.suppressed} more like it since the last one)` : "";
      last.set(text, { at, suppressed: 0 });
      write(`sluice: OpenTelemetry ${level} (${where}): ${text}${repeats}\n`);
    };
  return { error: log("error"), warn: log("warning"), info: log("info"), debug: log("debug"), verbose: log("verbose") };
}

function readable(value: unknown): string {
  if (value instanceof Error) return value.message;
  if (typeof value === "string") {
    // The SDK's error handler passes errors through JSON.stringify.
    if (value.startsWith("{")) {
      try {
        const parsed: unknown = JSON.parse(value);
        if (typeof parsed === "object" && parsed !== null && typeof (parsed as { message?: unknown }).message === "string") {
          return (parsed as { message: string }).message;
        }
      } catch {
        /* not JSON after all: print it as it is */
      }
    }
    return value;
  }
  if (typeof value === "object" && value !== null && typeof (value as { message?: unknown }).message === "string")
    return (value as { message: string }).message;
  return value === undefined ? "" : String(value);
}
