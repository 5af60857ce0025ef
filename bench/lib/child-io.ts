import { createInterface } from "node:readline";

/**
 * The child side of BenchChild: JSON events out on stdout, JSON commands in on stdin. Children
 * import this and nothing from the parent.
 */
export function emit(event: { readonly type: string; readonly [key: string]: unknown }): void {
  process.stdout.write(`${JSON.stringify(event)}\n`);
}

/** The child's one JSON argument. */
export function configArgument<T>(): T {
  const raw = process.argv[2];
  if (raw === undefined) throw new Error("a bench child takes one JSON argument");
  return JSON.parse(raw) as T;
}

/** Calls `handle` for every JSON command on stdin; stdin closing (the parent died) ends the process. */
export function onCommands(handle: (command: { readonly type: string; readonly [key: string]: unknown }) => void | Promise<void>): void {
  const lines = createInterface({ input: process.stdin });
  lines.on("line", (line) => {
    let command: { type: string };
    try {
      command = JSON.parse(line) as { type: string };
    } catch {
      return;
    }
    Promise.resolve(handle(command)).catch((error: unknown) => {
      emit({ type: "error", command: command.type, message: error instanceof Error ? (error.stack ?? error.message) : String(error) });
    });
  });
  lines.on("close", () => process.exit(0));
}

/** CPU time (user + system) and memory of this process, for the parent's resource figures. */
export function resourceUsage(): { cpuMs: number; rssBytes: number; heapUsedBytes: number; at: number } {
  const cpu = process.cpuUsage();
  const memory = process.memoryUsage();
  return { cpuMs: (cpu.user + cpu.system) / 1000, rssBytes: memory.rss, heapUsedBytes: memory.heapUsed, at: performance.timeOrigin + performance.now() };
}
