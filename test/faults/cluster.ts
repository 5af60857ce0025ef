// The real parts a fault-harness run drives (docs/design.md §5.3): a private Kafka broker it may restart,
// one Toxiproxy proxy per controller in front of its own broker listener (so that one controller's
// connection can be cut), and three `sluice controller` processes of one failover group. Every
// process is started here and ended by its own pid.
import { spawn, type ChildProcess } from "node:child_process";
import { createWriteStream, mkdirSync, writeFileSync, type WriteStream } from "node:fs";
import { join } from "node:path";
import { Kafka, logLevel } from "kafkajs";
import { createGrpcQuotaClient, type QuotaServiceClient } from "@sluice/protocol";
import { freePorts } from "../support/failover-group.ts";
import { PrivateKafka } from "../support/private-kafka.ts";
import { BUILT_PACKAGES_FLAGS, NOOP_COMPUTATION, ROOT, SLUICE_BIN } from "../support/processes.ts";
import type { HistoryWriter } from "./history.ts";
import { ensureToxiproxy, ToxiproxyApi } from "./toxiproxy-api.ts";

/** Log lines of a controller that restored the persisted state as the new leader (a documented restore). */
const RESTORE_LINE = /taking over generation \d+: dynamic_spec version/;
const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

export interface ControllerSlot {
  readonly index: number;
  readonly address: string;
  readonly proxyName: string;
  readonly specPath: string;
  process: ChildProcess | null;
}

export interface ClusterOptions {
  readonly runDir: string;
  readonly pipeline: string;
  readonly history: HistoryWriter;
  /** dynamic_spec.throttlers of the pipeline. */
  readonly throttlers: Record<string, unknown>;
  readonly sessionTimeout: string;
}

export class FaultCluster {
  readonly slots: ControllerSlot[] = [];
  private readonly logs = new Map<number, WriteStream>();
  private readonly probes = new Map<string, QuotaServiceClient>();
  private stopToxiproxy: () => Promise<void> = async () => {};

  private constructor(
    readonly options: ClusterOptions,
    readonly kafka: PrivateKafka,
    readonly toxiproxy: ToxiproxyApi,
  ) {}

  get addresses(): string[] {
    return this.slots.map((s) => s.address);
  }

  get electionGroup(): string {
    return `${this.options.pipeline}.controller`;
  }

  static async start(options: ClusterOptions): Promise<FaultCluster> {
    const toxiproxy = await ensureToxiproxy();
    // Per controller: the broker listens on `listen` and advertises `proxy`, where Toxiproxy listens.
    const [c0, c1, c2, l0, l1, l2, p0, p1, p2] = await freePorts(9);
    const controllerPorts = [c0, c1, c2] as number[];
    const listenPorts = [l0, l1, l2] as number[];
    const proxyPorts = [p0, p1, p2] as number[];
    const extraListeners = listenPorts.map((port, i) => `C${i}:${port}:${proxyPorts[i]}`).join(",");
    const kafka = await PrivateKafka.start({ extraListeners });
    const cluster = new FaultCluster(options, kafka, new ToxiproxyApi(toxiproxy.apiUrl));
    cluster.stopToxiproxy = toxiproxy.stop;
    await cluster.createTopic(`${options.pipeline}-in`);
    const addresses = controllerPorts.map((port) => `127.0.0.1:${port}`);
    for (let i = 0; i < 3; i++) {
      const proxyName = `${options.pipeline}-c${i}`;
      await cluster.toxiproxy.create(proxyName, proxyPorts[i] as number, listenPorts[i] as number);
      const specPath = join(options.runDir, `controller-${i}.json`);
      writeFileSync(specPath, JSON.stringify(cluster.spec(`127.0.0.1:${proxyPorts[i]}`, addresses), null, 2));
      cluster.slots.push({ index: i, address: addresses[i] as string, proxyName, specPath, process: null });
    }
    for (const slot of cluster.slots) cluster.startController(slot);
    return cluster;
  }

  /** The spec of one controller: the same pipeline for all, each reaching the broker through its own proxy. */
  private spec(broker: string, addresses: string[]): unknown {
    const { pipeline, throttlers, sessionTimeout } = this.options;
    return {
      pipeline,
      kafka: { brokers: [broker], session_timeout: sessionTimeout },
      controller: { addresses },
      streams: { input: { topic: `${pipeline}-in` } },
      computations: { Reader: { module: NOOP_COMPUTATION, inputs: ["input"] } },
      dynamic_spec: { throttlers, computations: {} },
    };
  }

  startController(slot: ControllerSlot): void {
    const port = slot.address.split(":")[1] ?? "0";
    // From dist/ under the end-to-end lane (BUILT_PACKAGES_FLAGS): a replacement then starts in about a
    // second instead of compiling the CLI through tsx first, which the failover time would count.
    const child = spawn(process.execPath, [...BUILT_PACKAGES_FLAGS, SLUICE_BIN, "controller", slot.specPath, "--port", port], {
      cwd: ROOT,
      stdio: ["ignore", "pipe", "pipe"],
    });
    slot.process = child;
    let log = this.logs.get(slot.index);
    if (!log) {
      log = createWriteStream(join(this.options.runDir, `controller-${slot.index}.log`), { flags: "a" });
      this.logs.set(slot.index, log);
    }
    const out = log;
    out.write(`--- ${new Date().toISOString()} started pid ${child.pid} on ${slot.address}\n`);
    let partial = "";
    const onData = (chunk: Buffer) => {
      const lines = (partial + chunk.toString()).split("\n");
      partial = lines.pop() ?? "";
      for (const line of lines) {
        const at = Date.now();
        out.write(`${new Date(at).toISOString()} ${line}\n`);
        if (RESTORE_LINE.test(line)) this.options.history.write({ type: "restore", at, controller: slot.address, line });
      }
    };
    child.stdout?.on("data", onData);
    child.stderr?.on("data", onData);
    child.on("exit", (code, signal) => out.write(`--- ${new Date().toISOString()} pid ${child.pid} exited (${signal ?? code})\n`));
  }

  isRunning(slot: ControllerSlot): boolean {
    const p = slot.process;
    return p !== null && p.exitCode === null && p.signalCode === null;
  }

  /** Sends `signal` to this controller's own pid. */
  signal(slot: ControllerSlot, signal: NodeJS.Signals): void {
    if (this.isRunning(slot)) slot.process?.kill(signal);
  }

  /** Stops it (SIGTERM, then SIGKILL after `graceMs`) and waits until it is gone, at most 5 s after the SIGKILL. */
  async stopController(slot: ControllerSlot, graceMs = 10_000): Promise<void> {
    const child = slot.process;
    if (!child || !this.isRunning(slot)) return;
    const exited = new Promise((resolve) => child.once("exit", resolve)).then(() => "exited");
    child.kill("SIGCONT");
    child.kill("SIGTERM");
    if ((await Promise.race([exited, sleep(graceMs)])) !== "exited") {
      child.kill("SIGKILL");
      await Promise.race([exited, sleep(5_000)]);
    }
  }

  /**
   * The controller that answers DescribeThrottlers as the leader now, with its snapshot, skipping
   * `exclude`: addresses, or processes (a controller started again on the same address is another).
   */
  async leader(
    exclude: readonly (string | ChildProcess)[] = [],
    sentAt?: { value: number },
  ): Promise<{ slot: ControllerSlot; snapshot: LeaderSnapshot } | null> {
    for (const slot of this.slots) {
      if (exclude.includes(slot.address) || (slot.process !== null && exclude.includes(slot.process)) || !this.isRunning(slot)) continue;
      // One channel per address for the whole run: a new one per poll costs a handshake, which a
      // loaded machine can stretch past the deadline. gRPC reconnects it after a restart.
      let client = this.probes.get(slot.address);
      if (!client) {
        client = createGrpcQuotaClient(slot.address);
        this.probes.set(slot.address, client);
      }
      try {
        if (sentAt) sentAt.value = Date.now();
        const { snapshotJson } = await client.describeThrottlers({ deadlineAt: Date.now() + 1_500 });
        const snapshot = JSON.parse(snapshotJson) as LeaderSnapshot;
        if (snapshot.failover?.role === "leader") return { slot, snapshot };
      } catch {
        // a follower refuses; a paused or dead one does not answer
      }
    }
    return null;
  }

  /** Polls until a controller other than `exclude` serves as leader; the time it took, or null after `timeoutMs`. */
  async waitForLeader(exclude: readonly (string | ChildProcess)[], timeoutMs: number): Promise<{ slot: ControllerSlot; at: number } | null> {
    const deadline = Date.now() + timeoutMs;
    while (Date.now() < deadline) {
      const found = await this.leader(exclude);
      if (found) return { slot: found.slot, at: Date.now() };
      await sleep(100);
    }
    return null;
  }

  /** Deletes the election group on the broker (docs/design.md §5.3: its generation then restarts at 1). */
  async deleteElectionGroup(timeoutMs: number): Promise<string> {
    const admin = this.admin();
    await admin.connect();
    const deadline = Date.now() + timeoutMs;
    try {
      for (;;) {
        try {
          await admin.deleteGroups([this.electionGroup]);
          return "deleted";
        } catch (error) {
          const text = String((error as { groups?: { error?: unknown }[] }).groups?.[0]?.error ?? error);
          if (/GROUP_ID_NOT_FOUND|does not exist/i.test(text)) return "already gone";
          // GROUP_NOT_EMPTY while killed members wait out the session timeout; the coordinator after a restart.
          if (Date.now() > deadline) throw new Error(`deleting group ${this.electionGroup} failed for ${timeoutMs} ms: ${text}`);
          await sleep(500);
        }
      }
    } finally {
      await admin.disconnect();
    }
  }

  private admin() {
    return new Kafka({ clientId: "sluice-fault-harness", brokers: this.kafka.brokers, logLevel: logLevel.NOTHING }).admin();
  }

  private async createTopic(topic: string): Promise<void> {
    const admin = this.admin();
    await admin.connect();
    try {
      await admin.createTopics({ topics: [{ topic, numPartitions: 1 }], waitForLeaders: true });
    } finally {
      await admin.disconnect();
    }
  }

  /** Ends every process this cluster started (by pid) and removes its proxies and the broker's home. */
  async close(): Promise<void> {
    for (const probe of this.probes.values()) probe.close();
    await Promise.all(this.slots.map((slot) => this.stopController(slot, 3_000)));
    for (const slot of this.slots) await this.toxiproxy.remove(slot.proxyName).catch(() => {});
    await this.kafka.dispose();
    await this.stopToxiproxy();
    for (const log of this.logs.values()) log.end();
  }
}

export interface LeaderSnapshot {
  readonly version: number;
  readonly throttlers: { id: string; limit: number | null; maxQueueSize?: number }[];
  readonly failover?: { role: string; leader: string | null; generation: number | null };
}

export function ensureDir(dir: string): string {
  mkdirSync(dir, { recursive: true });
  return dir;
}
