import { AsyncLocalStorage } from "node:async_hooks";
import { spawn, type ChildProcess } from "node:child_process";
import { createInterface } from "node:readline";
import { join } from "node:path";
import { CHILDREN_DIR, ROOT } from "./paths.ts";

/** A JSON line a child wrote on stdout: every message has a `type`. */
export interface ChildEvent {
  readonly type: string;
  readonly [key: string]: unknown;
}

const running = new Set<BenchChild>();

/** The children a group started (quick mode runs groups side by side; each stops its own). */
const owners = new AsyncLocalStorage<Set<BenchChild>>();

/** Set by quick mode (bench/lib/child-bundle.ts): children start from these bundles instead. */
let bundleDir: string | null = null;

export function startChildrenFromBundles(dir: string | null): void {
  bundleDir = dir;
}

/**
 * A full run under the end-to-end lane (SLUICE_E2E_BUILT=1: it ran `pnpm build`): children load the
 * packages' compiled dist/ instead of compiling their sources through tsx on every start; the
 * bench's own files still go through tsx. Quick mode's children never use this: they start from
 * bundles of the sources (bench/lib/child-bundle.ts), whatever the lane.
 */
const BUILT_PACKAGES: readonly string[] = process.env["SLUICE_E2E_BUILT"] === "1" ? ["--import", join(ROOT, "test/support/use-built-packages.mjs")] : [];

/**
 * A bench child process (bench/children/*.ts: run through tsx in a full run, from its esbuild
 * bundle with plain node in quick mode): JSON lines out on stdout, JSON
 * commands in on stdin, anything else on stderr. Children are what keeps a server and its load
 * from sharing one event loop, and what lets a claim about processes be measured with processes.
 */
export class BenchChild {
  readonly events: ChildEvent[] = [];
  stderr = "";
  readonly exited: Promise<{ code: number | null; signal: NodeJS.Signals | null }>;
  private readonly listeners = new Set<() => void>();
  private closed = false;

  private constructor(
    readonly name: string,
    private readonly process: ChildProcess,
  ) {
    running.add(this);
    owners.getStore()?.add(this);
    const lines = createInterface({ input: process.stdout as NodeJS.ReadableStream });
    lines.on("line", (line) => {
      const event = parseEvent(line);
      if (event) this.events.push(event);
      else this.stderr += `${line}\n`;
      for (const listener of [...this.listeners]) listener();
    });
    process.stderr?.on("data", (chunk: Buffer) => {
      this.stderr += chunk.toString();
      if (this.stderr.length > 200_000) this.stderr = this.stderr.slice(-100_000);
    });
    // "close", not "exit": the exit can come before the last lines of stdout have been read, and a
    // waitFor would then miss an event the child did write.
    this.exited = new Promise((done) =>
      process.on("close", (code, signal) => {
        this.closed = true;
        running.delete(this);
        done({ code, signal });
        for (const listener of [...this.listeners]) listener();
      }),
    );
  }

  /** Starts `bench/children/<script>` with one JSON argument. */
  static start(script: string, config: unknown, options: { env?: NodeJS.ProcessEnv; nodeArgs?: readonly string[] } = {}): BenchChild {
    const entry = bundleDir === null ? ["--import", "tsx", ...BUILT_PACKAGES, join(CHILDREN_DIR, script)] : [join(bundleDir, script.replace(/\.ts$/, ".js"))];
    const args = [...(options.nodeArgs ?? []), ...entry, JSON.stringify(config)];
    const child = spawn(process.execPath, args, {
      cwd: ROOT,
      env: { ...process.env, ...options.env },
      stdio: ["pipe", "pipe", "pipe"],
    });
    return new BenchChild(script, child);
  }

  get pid(): number {
    return this.process.pid ?? -1;
  }

  /** Resolves with the first event (seen or still to come) that matches. */
  waitFor(match: (event: ChildEvent) => boolean, timeoutMs: number, what = "event"): Promise<ChildEvent> {
    return new Promise((resolve, reject) => {
      let timer: NodeJS.Timeout | undefined;
      const check = () => {
        const event = this.events.find(match);
        if (event) {
          finish();
          resolve(event);
        } else if (this.closed) {
          finish();
          reject(new Error(`${this.name} exited (${this.process.exitCode ?? this.process.signalCode}) before ${what}\n${tail(this.stderr)}`));
        }
      };
      const finish = () => {
        clearTimeout(timer);
        this.listeners.delete(check);
      };
      timer = setTimeout(() => {
        finish();
        reject(new Error(`${this.name}: no ${what} after ${timeoutMs} ms\n${tail(this.stderr)}`));
      }, timeoutMs);
      this.listeners.add(check);
      check();
    });
  }

  waitForType(type: string, timeoutMs: number): Promise<ChildEvent> {
    return this.waitFor((event) => event.type === type, timeoutMs, `"${type}"`);
  }

  /** Sends a command and waits for the reply of the same type that came after it. */
  async request(command: ChildEvent, timeoutMs = 30_000): Promise<ChildEvent> {
    const seen = this.events.length;
    this.send(command);
    return this.waitFor((event) => event.type === command.type && this.events.indexOf(event) >= seen, timeoutMs, `reply to "${command.type}"`);
  }

  send(command: ChildEvent): void {
    this.process.stdin?.write(`${JSON.stringify(command)}\n`);
  }

  /** SIGTERM to this child's own pid, SIGKILL after the grace. */
  async stop(graceMs = 5_000): Promise<void> {
    if (this.process.exitCode !== null || this.process.signalCode !== null) return;
    this.process.kill("SIGTERM");
    let timer: NodeJS.Timeout | undefined;
    const killed = new Promise<void>((resolve) => {
      timer = setTimeout(() => {
        this.process.kill("SIGKILL");
        resolve();
      }, graceMs);
    });
    await Promise.race([this.exited, killed]);
    clearTimeout(timer);
    await this.exited;
  }
}

/** Runs `run` so that every child started inside it (however deep) is added to `owned`. */
export function ownChildren<T>(owned: Set<BenchChild>, run: () => Promise<T>): Promise<T> {
  return owners.run(owned, run);
}

/** Ends these children if still running (each by its own pid): after a group, whatever happened. */
export async function stopChildren(children: Iterable<BenchChild>): Promise<void> {
  await Promise.all([...children].map((child) => child.stop(2_000)));
}

export function killAllChildrenNow(): void {
  for (const child of running) {
    if (child.pid > 0) {
      try {
        process.kill(child.pid, "SIGKILL");
      } catch {
        // already gone
      }
    }
  }
}

function parseEvent(line: string): ChildEvent | null {
  if (!line.startsWith("{")) return null;
  try {
    const value = JSON.parse(line) as unknown;
    if (typeof value === "object" && value !== null && typeof (value as { type?: unknown }).type === "string") return value as ChildEvent;
  } catch {
    // not ours
  }
  return null;
}

function tail(text: string, lines = 30): string {
  return text.trimEnd().split("\n").slice(-lines).join("\n");
}
