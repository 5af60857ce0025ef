// A Kafka broker of one test's own, for tests that stop and restart a broker: the shared one on
// 127.0.0.1:19092 serves every engineer and every test file and is never stopped. This one has its
// own ports and its own home (data, log, pid file) in a temp dir, and is started by
// `node scripts/kafka.mjs start` (which leaves it running) and ended by its own pid.
import { spawn } from "node:child_process";
import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import { createServer } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { ROOT } from "./processes.ts";

const KAFKA_SCRIPT = join(ROOT, "scripts/kafka.mjs");
const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));
/** scripts/kafka.mjs's own start timeout (KAFKA_START_TIMEOUT_MS, 120 s) and a minute for the rest. */
const LAUNCH_TIMEOUT_MS = Number(process.env["KAFKA_START_TIMEOUT_MS"] ?? 120_000) + 60_000;

/** A port nothing listens on now (the OS picks it; it is free again once this returns). */
async function freePort(): Promise<number> {
  const server = createServer();
  await new Promise<void>((resolve, reject) => {
    server.once("error", reject);
    server.listen(0, "127.0.0.1", resolve);
  });
  const address = server.address();
  await new Promise((resolve) => server.close(resolve));
  if (address === null || typeof address === "string") throw new Error("no port from listen(0)");
  return address.port;
}

function isAlive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    const stat = readFileSync(`/proc/${pid}/stat`, "utf8");
    return !/^[ZX]$/.test(stat.slice(stat.lastIndexOf(")") + 2, stat.lastIndexOf(")") + 3));
  } catch (error) {
    return (error as NodeJS.ErrnoException).code === "EPERM";
  }
}

export class PrivateKafka {
  /** The running broker's pid; undefined while it is down. */
  pid: number | undefined;
  /** Each start's line from scripts/kafka.mjs (how long it took). */
  readonly startLines: string[] = [];

  private constructor(
    readonly home: string,
    readonly port: number,
    readonly controllerPort: number,
    /** KAFKA_EXTRA_LISTENERS of scripts/kafka.mjs ("" = none): listeners that advertise a proxy's port. */
    readonly extraListeners = "",
  ) {}

  get brokers(): string[] {
    return [`127.0.0.1:${this.port}`];
  }

  /** A fresh broker (formatted data dir) on two free ports, with `extraListeners` as KAFKA_EXTRA_LISTENERS. */
  static async start(options: { extraListeners?: string } = {}): Promise<PrivateKafka> {
    const home = mkdtempSync(join(tmpdir(), "sluice-private-kafka-"));
    const kafka = new PrivateKafka(home, await freePort(), await freePort(), options.extraListeners ?? "");
    await kafka.launch(false);
    return kafka;
  }

  /** Starts the broker again on the same ports and data dir (topics, offsets and transactions kept). */
  async startAgain(): Promise<void> {
    if (this.pid !== undefined) throw new Error(`private broker pid ${this.pid} is still running`);
    await this.launch(true);
  }

  /**
   * Ends the broker by its pid: SIGKILL is a crash, SIGTERM a controlled shutdown (which a loaded
   * broker can take seconds over). Waits until it is gone, SIGKILLing it after `timeoutMs`.
   */
  async kill(signal: "SIGKILL" | "SIGTERM", timeoutMs = 30_000): Promise<void> {
    const pid = this.pid;
    if (pid === undefined) return;
    try {
      process.kill(pid, signal);
    } catch {
      // already gone
    }
    const deadline = Date.now() + timeoutMs;
    while (isAlive(pid)) {
      if (Date.now() > deadline) {
        try {
          process.kill(pid, "SIGKILL");
        } catch {
          // gone meanwhile
        }
        await sleep(500);
        break;
      }
      await sleep(100);
    }
    this.pid = undefined;
  }

  /** For after hooks: ends the broker (if running) and removes its home, within about 6 s whatever the broker does. */
  async dispose(): Promise<void> {
    await this.kill("SIGKILL", 5_000);
    rmSync(this.home, { recursive: true, force: true });
  }

  /** The pid scripts/kafka.mjs recorded for this home's broker, if any. */
  private recordedPid(): number | undefined {
    try {
      const pid = Number(readFileSync(join(this.home, "kafka.pid"), "utf8").trim());
      return Number.isInteger(pid) && pid > 0 ? pid : undefined;
    } catch {
      return undefined;
    }
  }

  private async launch(keepData: boolean): Promise<void> {
    const env: NodeJS.ProcessEnv = {
      ...process.env,
      KAFKA_HOME: this.home,
      KAFKA_PORT: String(this.port),
      KAFKA_CONTROLLER_PORT: String(this.controllerPort),
      KAFKA_KEEP_DATA: keepData ? "1" : "0",
      KAFKA_EXTRA_LISTENERS: this.extraListeners,
    };
    delete env["KAFKA_BROKERS"]; // that names the shared broker: the script would start nothing
    const child = spawn(process.execPath, [KAFKA_SCRIPT, "start"], { cwd: ROOT, env, stdio: ["ignore", "pipe", "pipe"] });
    let output = "";
    child.stdout.on("data", (chunk: Buffer) => (output += chunk.toString()));
    child.stderr.on("data", (chunk: Buffer) => (output += chunk.toString()));
    const exited = new Promise<number | null>((resolve) => child.on("exit", (c) => resolve(c)));
    // The script gives up on a broker that is not ready after its own start timeout; this bounds the
    // script itself (a Maven fetch, a lock), so that a test never waits for ever on a start.
    let timer: NodeJS.Timeout | undefined;
    const timedOut = new Promise<"timeout">((resolve) => {
      timer = setTimeout(() => resolve("timeout"), LAUNCH_TIMEOUT_MS);
    });
    const code = await Promise.race([exited, timedOut]).finally(() => clearTimeout(timer));
    const pid = this.recordedPid();
    if (code === "timeout") {
      child.kill("SIGKILL");
      if (pid !== undefined && isAlive(pid)) process.kill(pid, "SIGKILL");
      throw new Error(
        `private Kafka broker on port ${this.port}: \`node scripts/kafka.mjs start\` had not ended after ${LAUNCH_TIMEOUT_MS} ms; killed it:\n${output}`,
      );
    }
    if (code !== 0 || pid === undefined) {
      throw new Error(`private Kafka broker on port ${this.port} did not start (exit ${code}):\n${output}`);
    }
    this.pid = pid;
    this.startLines.push(
      output
        .trim()
        .split("\n")
        .find((line) => line.includes("ready on")) ?? output.trim(),
    );
  }
}
