// In-memory stand-ins for the two ports of a FailoverController (DESIGN §7.4), for tests in virtual
// time: the election is driven by the test, the store keeps records in memory and can be made to hang;
// and a member of a failover group built on them (startStandInMember).
import assert from "node:assert/strict";
import type { Clock } from "@sluice/core";
import type { DynamicSpec } from "@sluice/spec";
import {
  EMPTY_CONTROLLER_STATE,
  FailoverController,
  newerRecord,
  type ControllerElection,
  type FailoverControllerOptions,
  type ControllerState,
  type ControllerStateStore,
  type ElectionListener,
  type LeaderRecord,
  type PersistedBuckets,
  type PersistedSpec,
} from "../src/index.ts";

export class MemoryStore implements ControllerStateStore {
  state: ControllerState = EMPTY_CONTROLLER_STATE;
  /**
   * `bucketsCodec` is applied to every buckets record saved (e.g. packages/kafka's encoding to JSON
   * and back, so a successor reads what it would read from the topic); default: kept as given.
   */
  constructor(private readonly bucketsCodec: (record: PersistedBuckets) => PersistedBuckets = (record) => record) {}
  bucketWrites: PersistedBuckets[] = [];
  /** While set, saveBuckets waits for it (a slow or unreachable broker). */
  hold: Promise<void> | null = null;
  async start(): Promise<void> {}
  async catchUp(): Promise<ControllerState> {
    return this.state;
  }
  latest(): ControllerState {
    return this.state;
  }
  async saveBuckets(record: PersistedBuckets): Promise<void> {
    if (this.hold) await this.hold;
    const stored = this.bucketsCodec(record);
    this.bucketWrites.push(stored);
    this.state = { ...this.state, buckets: newerRecord(this.state.buckets, stored) };
  }
  async saveSpec(record: PersistedSpec): Promise<void> {
    this.state = { ...this.state, spec: newerRecord(this.state.spec, record) };
  }
  async saveLeader(record: LeaderRecord): Promise<void> {
    this.state = { ...this.state, leader: newerRecord(this.state.leader, record) };
  }
  async close(): Promise<void> {}
}

export class DrivenElection implements ControllerElection {
  listener: ElectionListener | null = null;
  async start(listener: ElectionListener): Promise<void> {
    this.listener = listener;
  }
  async close(): Promise<void> {}
  elect(generation: number, leading: boolean, at: number): void {
    this.listener?.onElected({ generation, memberId: "m", leading, confirmedAtMs: at });
  }
}

export interface StandInMemberOptions {
  readonly store: MemoryStore;
  readonly clock: Clock;
  readonly address: string;
  readonly dynamicSpec: DynamicSpec;
  /** Default 60 s: longer than the virtual time of a test, so only what the test does ends a leadership. */
  readonly leaseMs?: number;
  readonly loadSourceOf?: FailoverControllerOptions["loadSourceOf"];
}

/** Turns of the event loop `lead` waits at most for a takeover (it reads the in-memory store: a few suffice). */
const TAKEOVER_TURNS = 50;

/**
 * A started FailoverController of pipeline "p" on a DrivenElection of its own and the given store,
 * with its log lines; `lead(generation)` elects it and waits until it serves, `throttler(id)` is
 * that throttler in its snapshot.
 */
export async function startStandInMember(options: StandInMemberOptions) {
  const election = new DrivenElection();
  const lines: string[] = [];
  const { clock } = options;
  const controller = new FailoverController({
    pipeline: "p",
    dynamicSpec: options.dynamicSpec,
    computations: [],
    clock,
    address: options.address,
    store: options.store,
    election,
    leaseMs: options.leaseMs ?? 60_000,
    log: (line) => lines.push(line),
    ...(options.loadSourceOf ? { loadSourceOf: options.loadSourceOf } : {}),
  });
  await controller.start();
  const lead = async (generation: number) => {
    election.elect(generation, true, clock.now());
    for (let i = 0; i < TAKEOVER_TURNS && controller.status().role !== "leader"; i++) await new Promise((resolve) => setImmediate(resolve));
    assert.equal(controller.status().role, "leader");
  };
  const throttler = (id: string) => {
    const found = controller.snapshot().throttlers.find((x) => x.id === id);
    assert.ok(found, `throttler "${id}" is in the snapshot`);
    return found;
  };
  return { controller, election, lines, lead, throttler };
}
