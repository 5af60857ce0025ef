import { randomUUID } from "node:crypto";
import type { Clock } from "@sluice/core";
import type { GroupWatermarkView, PartitionBound, PartitionWatermarkReport, ReportWatermarksCall, ReportWatermarksResult } from "@sluice/protocol";
import { reportProblem } from "./report-limits.ts";

// Watermark alignment groups (docs/design.md §12), held by the controller because it is the one process
// every job already talks to: a group may span workers and computations, and a worker alone only
// sees its own partitions. Nothing here is persisted: each worker reports every aligned partition
// it owns every report interval, so a restarted (or newly elected) controller knows the groups
// again within one interval; until then it says it is `settling` and workers keep their holds.

export const ALIGNMENT_DEFAULTS = Object.freeze({
  /** A partition not reported for this long is forgotten (its worker died or lost it). */
  entryTtlMs: 10_000,
});

interface Entry {
  readonly group: string;
  readonly partitionId: string;
  readonly clientId: string;
  /** 0 = the partition has read nothing yet. */
  readonly watermarkMs: number;
  readonly idle: boolean;
  readonly held: boolean;
  readonly reportedAt: number;
}

export interface AlignmentGroupSnapshot {
  readonly group: string;
  /** Minimum read watermark over the live partitions (epoch ms); null when none is live or one has read nothing yet. */
  readonly watermarkMs: number | null;
  readonly partitions: number;
  readonly held: number;
  readonly idle: number;
  /** Live partitions that have read nothing yet (each holds the group at its start). */
  readonly unread: number;
}

export interface AlignmentGroupsOptions {
  readonly clock: Clock;
  readonly entryTtlMs?: number;
  /** How long after start answers say `settling`; default entryTtlMs (every live worker reported by then). */
  readonly settleMs?: number;
}

/** The two smallest live watermarks of a group (0 counts as smallest: a partition that read nothing). */
interface GroupMinimum {
  first: number;
  firstId: string | null;
  second: number;
  partitions: number;
  held: number;
  idle: number;
  unread: number;
}

export class AlignmentGroups {
  /** Changes with every controller instance, so a worker can tell a restart from a normal answer. */
  readonly instance = randomUUID();
  private readonly clock: Clock;
  private readonly entryTtlMs: number;
  private readonly settleUntil: number;
  private readonly entries = new Map<string, Entry>();
  private readonly groups = new Map<string, Set<string>>();
  private readonly byClient = new Map<string, Set<string>>();

  constructor(options: AlignmentGroupsOptions) {
    this.clock = options.clock;
    this.entryTtlMs = options.entryTtlMs ?? ALIGNMENT_DEFAULTS.entryTtlMs;
    this.settleUntil = this.clock.now() + (options.settleMs ?? this.entryTtlMs);
  }

  /**
   * Replaces everything `clientId` reported before with this report (a partition it leaves out was
   * revoked), then answers each reported partition's bound: the minimum over the *other* live
   * partitions of its group. Asking for the others' minimum rather than the group's keeps the
   * slowest partition free to read as fast as it can between reports (Flink capped catch-up at
   * drift per update interval, FLINK-37399).
   */
  report(call: ReportWatermarksCall): ReportWatermarksResult {
    const problem = reportProblem(call);
    if (problem) throw problem;
    const now = this.clock.now();
    this.expire(now);
    const previous = this.byClient.get(call.clientId) ?? new Set<string>();
    const current = new Set<string>();
    for (const partition of call.partitions) {
      this.put(call.clientId, partition, now);
      current.add(partition.partitionId);
    }
    for (const id of previous) if (!current.has(id) && this.entries.get(id)?.clientId === call.clientId) this.remove(id);
    if (current.size > 0) this.byClient.set(call.clientId, current);
    else this.byClient.delete(call.clientId);

    const minima = new Map<string, GroupMinimum>();
    for (const partition of call.partitions) if (!minima.has(partition.groupName)) minima.set(partition.groupName, this.minimumOf(partition.groupName));
    const bounds = call.partitions.map((partition): PartitionBound => {
      const group = minima.get(partition.groupName);
      const self = this.entries.get(partition.partitionId);
      const selfLive = self !== undefined && isLive(self);
      const othersLive = (group?.partitions ?? 0) - (group?.idle ?? 0) - (selfLive ? 1 : 0);
      if (!group || othersLive <= 0) return { partitionId: partition.partitionId, othersWatermarkMs: 0, unbounded: true };
      const others = selfLive && group.firstId === partition.partitionId ? group.second : group.first;
      return { partitionId: partition.partitionId, othersWatermarkMs: others, unbounded: false };
    });
    const groups = [...minima].map(
      ([groupName, m]): GroupWatermarkView => ({
        groupName,
        watermarkMs: m.partitions - m.idle > 0 ? m.first : 0,
        partitions: m.partitions,
        held: m.held,
        idle: m.idle,
      }),
    );
    return { bounds, groups, controllerInstance: this.instance, settling: now < this.settleUntil };
  }

  /** Every group with a live or idle partition, by name. */
  snapshot(): AlignmentGroupSnapshot[] {
    this.expire(this.clock.now());
    return [...this.groups.keys()].sort().map((group) => {
      const m = this.minimumOf(group);
      const live = m.partitions - m.idle;
      return { group, watermarkMs: live > 0 && m.first > 0 ? m.first : null, partitions: m.partitions, held: m.held, idle: m.idle, unread: m.unread };
    });
  }

  private minimumOf(group: string): GroupMinimum {
    const m: GroupMinimum = { first: Infinity, firstId: null, second: Infinity, partitions: 0, held: 0, idle: 0, unread: 0 };
    for (const id of this.groups.get(group) ?? []) {
      const entry = this.entries.get(id);
      if (!entry) continue;
      m.partitions += 1;
      if (entry.held) m.held += 1;
      if (!isLive(entry)) {
        m.idle += 1;
        continue;
      }
      if (entry.watermarkMs === 0) m.unread += 1;
      if (entry.watermarkMs < m.first) {
        m.second = m.first;
        m.first = entry.watermarkMs;
        m.firstId = id;
      } else if (entry.watermarkMs < m.second) m.second = entry.watermarkMs;
    }
    return m;
  }

  private put(clientId: string, partition: PartitionWatermarkReport, now: number): void {
    const before = this.entries.get(partition.partitionId);
    if (before && before.group !== partition.groupName) this.groups.get(before.group)?.delete(partition.partitionId);
    if (before && before.clientId !== clientId) this.byClient.get(before.clientId)?.delete(partition.partitionId);
    this.entries.set(partition.partitionId, {
      group: partition.groupName,
      partitionId: partition.partitionId,
      clientId,
      watermarkMs: partition.watermarkMs,
      idle: partition.idle,
      held: partition.held,
      reportedAt: now,
    });
    let members = this.groups.get(partition.groupName);
    if (!members) {
      members = new Set();
      this.groups.set(partition.groupName, members);
    }
    members.add(partition.partitionId);
  }

  private remove(id: string): void {
    const entry = this.entries.get(id);
    if (!entry) return;
    this.entries.delete(id);
    const members = this.groups.get(entry.group);
    members?.delete(id);
    if (members?.size === 0) this.groups.delete(entry.group);
    this.byClient.get(entry.clientId)?.delete(id);
  }

  /** A worker that stopped reporting (died, cut off) no longer holds its groups back. */
  private expire(now: number): void {
    for (const [id, entry] of this.entries) if (now - entry.reportedAt >= this.entryTtlMs) this.remove(id);
    for (const [client, ids] of this.byClient) if (ids.size === 0) this.byClient.delete(client);
  }
}

/** Held partitions have data waiting, so they are never idle, whatever a report says. */
function isLive(entry: Entry): boolean {
  return entry.held || !entry.idle;
}
