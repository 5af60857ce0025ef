// In-memory stand-ins for the two ports of a FailoverController (docs/design.md §5.2), for tests in virtual
// time: the election is driven by the test, the store keeps records in memory and can be made to hang;
// and a member of a failover group built on them (startStandInMember).
import assert from "node:assert/strict";
import type { Clock } from "@sluice/core";
import type { DynamicSpec } from "@sluice/spec";
import { FailoverController, type FailoverControllerOptions } from "../src/index.ts";
import {
  EMPTY_CONTROLLER_STATE,
  StateWriterFencedError,
  type ControllerElection,
  type ControllerState,
  type ControllerStateStore,
  type ElectionListener,
  type PersistedThrottler,
  type StateWrite,
} from "@sluice/failover-ports";

/** The store's order is the order of writes, as a Kafka topic's is its offsets. */
export class MemoryStore implements ControllerStateStore {
  state: ControllerState = EMPTY_CONTROLLER_STATE;
  /**
   * `throttlerCodec` is applied to every throttler record written (e.g. packages/kafka's encoding to
   * JSON and back, so a successor reads what it would read from the topic); default: kept as given.
   */
  constructor(private readonly throttlerCodec: (record: PersistedThrottler) => PersistedThrottler = (record) => record) {}
  /** Every write, in order, as stored. */
  writes: StateWrite[] = [];
  /** While set, write() waits for it (a slow or unreachable broker). */
  hold: Promise<void> | null = null;
  /** While set, write() refuses with it (a broker that fails every write). */
  failWith: Error | null = null;
  /** Set: the next write is refused as Kafka refuses a fenced writer's. */
  fenceNext = false;
  /** The claims and reads, in order ("claim", "catchUp"). */
  calls: string[] = [];
  async start(): Promise<void> {}
  async claimWriter(): Promise<void> {
    this.calls.push("claim");
  }
  async catchUp(): Promise<ControllerState> {
    this.calls.push("catchUp");
    return this.state;
  }
  latest(): ControllerState {
    return this.state;
  }
  async write(records: StateWrite): Promise<void> {
    if (this.hold) await this.hold;
    if (this.fenceNext) {
      this.fenceNext = false;
      throw new StateWriterFencedError("the writer was fenced: another controller claimed it");
    }
    if (this.failWith) throw this.failWith;
    const throttlers = records.throttlers?.map(this.throttlerCodec);
    this.writes.push({ ...records, ...(throttlers ? { throttlers } : {}) });
    const next = new Map(this.state.throttlers);
    const keys = new Map([...this.state.keys].map(([id, ofThrottler]) => [id, new Map(ofThrottler)]));
    for (const record of throttlers ?? []) {
      if (record.key === undefined) next.set(record.throttlerId, record);
      else keys.set(record.throttlerId, (keys.get(record.throttlerId) ?? new Map()).set(record.key, record));
    }
    for (const id of records.removedThrottlers ?? []) next.delete(id);
    for (const { throttlerId, key } of records.removedKeys ?? []) keys.get(throttlerId)?.delete(key);
    this.state = { spec: records.spec ?? this.state.spec, throttlers: next, keys, leader: records.leader ?? this.state.leader };
  }
  /** The latest record of throttler `id`. */
  throttler(id: string): PersistedThrottler | undefined {
    return this.state.throttlers.get(id);
  }
  /** The records of throttler `id` written so far, oldest first. */
  throttlerWrites(id: string): PersistedThrottler[] {
    return this.writes.flatMap((w) => (w.throttlers ?? []).filter((r) => r.throttlerId === id));
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
