// In-memory stand-ins for the two ports of a FailoverController (DESIGN §7.4), for tests in virtual
// time: the election is driven by the test, the store keeps records in memory and can be made to hang.
import {
  EMPTY_CONTROLLER_STATE,
  newerRecord,
  type ControllerElection,
  type ControllerState,
  type ControllerStateStore,
  type ElectionListener,
  type LeaderRecord,
  type PersistedBuckets,
  type PersistedSpec,
} from "../src/index.ts";

export class MemoryStore implements ControllerStateStore {
  state: ControllerState = EMPTY_CONTROLLER_STATE;
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
    this.bucketWrites.push(record);
    this.state = { ...this.state, buckets: newerRecord(this.state.buckets, record) };
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
