// The nemesis (docs/design.md §5.3): it carries out one step of the schedule against the cluster, records
// when the fault started and ended, and measures the failover: how long until a controller serves
// as leader again (one other than the faulted leader, for the faults that take the leader away).
import type { ChildProcess } from "node:child_process";
import type { ControllerSlot, FaultCluster } from "./cluster.ts";
import type { FaultKind, HistoryWriter } from "./history.ts";
import type { FaultStep } from "./schedule.ts";

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));
/**
 * A group that has not elected a serving leader this long after a fault has failed to recover. Long,
 * because on a loaded 2-core machine three controllers starting at once took 93 s to listen.
 */
const RECOVERY_TIMEOUT_MS = 180_000;

export interface FaultOutcome {
  readonly index: number;
  readonly kind: FaultKind;
  readonly startedAt: number;
  readonly endedAt: number;
  readonly target: string;
  readonly detail: string;
  /** From the fault's start until a (different, where the leader was taken away) controller served as leader; null = never. */
  readonly failoverMs: number | null;
  readonly newLeader: string | null;
}

export class Nemesis {
  constructor(
    private readonly cluster: FaultCluster,
    private readonly history: HistoryWriter,
    private readonly log: (line: string) => void,
  ) {}

  async run(step: FaultStep, index: number): Promise<FaultOutcome> {
    const current = await this.cluster.waitForLeader([], RECOVERY_TIMEOUT_MS);
    if (!current) throw new Error(`fault #${index + 1} (${step.kind}): no controller serves as leader before the fault (waited ${RECOVERY_TIMEOUT_MS} ms)`);
    const leader = current.slot;
    switch (step.kind) {
      case "kill-leader":
        return this.killLeader(step, index, leader);
      case "pause-leader":
        return this.pauseLeader(step, index, leader);
      case "restart-broker":
        return this.restartBroker(step, index);
      case "all-down-group-deleted":
        return this.allDown(index);
      case "cut-connection":
        return this.cut(step, index, leader);
    }
  }

  private begin(index: number, kind: FaultKind, target: string, detail: string): number {
    const at = Date.now();
    this.history.write({ type: "fault", at, index, kind, phase: "start", target, detail });
    this.log(`fault #${index + 1} ${kind} on ${target}: ${detail}`);
    return at;
  }

  private async finish(
    index: number,
    kind: FaultKind,
    target: string,
    detail: string,
    startedAt: number,
    exclude: string[],
    measured?: { at: number; address: string } | null,
  ): Promise<FaultOutcome> {
    const endedAt = Date.now();
    this.history.write({ type: "fault", at: endedAt, index, kind, phase: "end", target });
    const found = measured ?? (await this.cluster.waitForLeader(exclude, RECOVERY_TIMEOUT_MS).then((f) => (f ? { at: f.at, address: f.slot.address } : null)));
    const failoverMs = found ? found.at - startedAt : null;
    if (found) this.history.write({ type: "recovered", at: found.at, index, kind, leader: found.address, failoverMs: found.at - startedAt });
    this.log(
      `fault #${index + 1} ${kind} ended; ${found ? `${found.address} served as leader ${failoverMs} ms after the fault began` : `no leader within ${RECOVERY_TIMEOUT_MS} ms`}`,
    );
    return { index, kind, startedAt, endedAt, target, detail, failoverMs, newLeader: found?.address ?? null };
  }

  private async successor(exclude: string | ChildProcess | null, timeoutMs: number): Promise<{ at: number; address: string } | null> {
    const found = await this.cluster.waitForLeader(exclude === null ? [] : [exclude], timeoutMs);
    return found ? { at: found.at, address: found.slot.address } : null;
  }

  private async killLeader(step: FaultStep, index: number, leader: ControllerSlot): Promise<FaultOutcome> {
    const detail = `SIGKILL pid ${leader.process?.pid}, replacement after ${step.restartAfterMs} ms`;
    const startedAt = this.begin(index, "kill-leader", leader.address, detail);
    const killed = leader.process;
    this.cluster.signal(leader, "SIGKILL");
    // Any leader but the killed process: a survivor, or the replacement on the killed one's port
    // (excluding the port waited for a survivor only, until the recovery timeout, when the
    // replacement won the election).
    const measuring = this.successor(killed, RECOVERY_TIMEOUT_MS);
    await sleep(step.restartAfterMs);
    await this.cluster.stopController(leader, 1_000);
    this.cluster.startController(leader);
    return this.finish(index, "kill-leader", leader.address, detail, startedAt, [], await measuring);
  }

  private async pauseLeader(step: FaultStep, index: number, leader: ControllerSlot): Promise<FaultOutcome> {
    const detail = `SIGSTOP pid ${leader.process?.pid} for ${step.pauseMs} ms`;
    const startedAt = this.begin(index, "pause-leader", leader.address, detail);
    this.cluster.signal(leader, "SIGSTOP");
    const measured = await this.successor(leader.address, step.pauseMs);
    await sleep(Math.max(0, startedAt + step.pauseMs - Date.now()));
    this.cluster.signal(leader, "SIGCONT");
    return this.finish(index, "pause-leader", leader.address, detail, startedAt, [], measured);
  }

  private async restartBroker(step: FaultStep, index: number): Promise<FaultOutcome> {
    const detail = `${step.brokerSignal} broker pid ${this.cluster.kafka.pid}, down ${step.downMs} ms`;
    const target = this.cluster.kafka.brokers[0] ?? "broker";
    const startedAt = this.begin(index, "restart-broker", target, detail);
    await this.cluster.kafka.kill(step.brokerSignal);
    await sleep(step.downMs);
    await this.cluster.kafka.startAgain();
    this.log(`broker back: ${this.cluster.kafka.startLines.at(-1) ?? ""}`);
    // Whoever led may still answer as leader while it has not noticed; the measure is from the fault's start to a leader that serves after it.
    return this.finish(index, "restart-broker", target, detail, startedAt, []);
  }

  private async allDown(index: number): Promise<FaultOutcome> {
    const startedAt = this.begin(index, "all-down-group-deleted", "all controllers", `stop all, delete group ${this.cluster.electionGroup}`);
    await Promise.all(this.cluster.slots.map((slot) => this.cluster.stopController(slot)));
    const deleted = await this.cluster.deleteElectionGroup(30_000);
    const detail = `stopped all, group ${this.cluster.electionGroup} ${deleted} after ${Date.now() - startedAt} ms`;
    this.log(detail);
    for (const slot of this.cluster.slots) this.cluster.startController(slot);
    return this.finish(index, "all-down-group-deleted", "all controllers", detail, startedAt, []);
  }

  private async cut(step: FaultStep, index: number, leader: ControllerSlot): Promise<FaultOutcome> {
    const target = step.cutTarget === "leader" ? leader : (this.cluster.slots.find((s) => s !== leader && this.cluster.isRunning(s)) ?? leader);
    const role = target === leader ? "leader" : "follower";
    const detail = `proxy ${target.proxyName} disabled for ${step.cutMs} ms (${role})`;
    const startedAt = this.begin(index, "cut-connection", target.address, detail);
    await this.cluster.toxiproxy.setEnabled(target.proxyName, false);
    // A follower's cut moves no leadership: the figure is then how soon a leader answers during it.
    const measured = await this.successor(role === "leader" ? target.address : null, step.cutMs);
    await sleep(Math.max(0, startedAt + step.cutMs - Date.now()));
    await this.cluster.toxiproxy.setEnabled(target.proxyName, true);
    return this.finish(index, "cut-connection", target.address, detail, startedAt, [], measured);
  }
}
