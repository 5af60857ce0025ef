import type { PersistedAdaptive } from "../adaptive/persisted-adaptive.ts";
import type { PersistedLeases } from "../concurrency/persisted-leases.ts";
import type { BucketBalance } from "../controller.ts";

// The state-store port of controller failover (DESIGN §2, §7.4). `packages/kafka` implements it on
// the compacted topic `<pipeline>.controller-state`; the controller itself never sees Kafka.

/** The dynamic_spec in force and its version, as the leader of `generation` persisted it. */
export interface PersistedSpec {
  readonly version: number;
  readonly dynamicSpecJson: string;
  readonly generation: number;
  readonly writtenAtMs: number;
}

/**
 * Every limited bucket's balance, each with the time it was read (epoch ms), and the leases of the
 * concurrency throttlers and the state of the adaptive loops (each absent in records written before
 * it was persisted).
 */
export interface PersistedBuckets {
  readonly buckets: Readonly<Record<string, BucketBalance>>;
  readonly leases?: Readonly<Record<string, PersistedLeases>>;
  readonly adaptive?: Readonly<Record<string, PersistedAdaptive>>;
  readonly generation: number;
  readonly writtenAtMs: number;
}

/** Who leads, announced by the leader itself once it serves; followers name it in `sluice-leader`. */
export interface LeaderRecord {
  /** host:port clients reach the leader at. */
  readonly address: string;
  readonly memberId: string;
  readonly generation: number;
  /** Epoch ms the leadership began. */
  readonly sinceMs: number;
}

/** The latest record of each kind; for each, the one of the highest generation wins. */
export interface ControllerState {
  readonly spec: PersistedSpec | null;
  readonly buckets: PersistedBuckets | null;
  readonly leader: LeaderRecord | null;
}

export const EMPTY_CONTROLLER_STATE: ControllerState = Object.freeze({ spec: null, buckets: null, leader: null });

export interface ControllerStateStore {
  /** Starts reading the state (idempotent). */
  start(): Promise<void>;
  /**
   * Everything written before this call, read back: a new leader calls it before it serves, so it
   * continues from the last state its predecessor persisted (Schema Registry's pattern).
   */
  catchUp(signal?: AbortSignal): Promise<ControllerState>;
  /** What has been read so far, without waiting (who leads, for followers). */
  latest(): ControllerState;
  /** Resolves once the broker acknowledged the record (acks from all in-sync replicas). */
  saveBuckets(record: PersistedBuckets): Promise<void>;
  saveSpec(record: PersistedSpec): Promise<void>;
  saveLeader(record: LeaderRecord): Promise<void>;
  /** Idempotent. */
  close(): Promise<void>;
}

/** Keeps `next` unless `current` comes from a later leadership (a deposed leader's late write). */
export function newerRecord<T extends { readonly generation: number }>(current: T | null, next: T): T {
  return current !== null && current.generation > next.generation ? current : next;
}
