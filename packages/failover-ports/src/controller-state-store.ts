import type { PersistedAdaptive } from "./persisted-adaptive.ts";
import type { PersistedLeases } from "./persisted-leases.ts";

// The state-store port of controller failover (docs/design.md §5.2, §5.3). `packages/kafka` implements it on
// the compacted topic `<pipeline>.controller-state`, written only in committed transactions of one
// transactional id; the controller itself never sees Kafka. The order of the records is the store's
// (Kafka's offsets), never a number of ours: group generations restart at 1 when Kafka deletes an
// empty group, so `generation` below is for people reading the records, not an order.

/** The dynamic_spec in force and its version (record `spec`). */
export interface PersistedSpec {
  readonly version: number;
  readonly dynamicSpecJson: string;
  /** The group generation of the leader that wrote it: informative only. */
  readonly generation: number;
  readonly writtenAtMs: number;
}

/**
 * One throttler's state (record `bucket/<throttler id>`): a rate bucket's balance and the rate it
 * refilled at when read, a concurrency throttler's leases, an adaptive loop's state. A successor
 * accrues the downtime at `limitPerSecond`, the limit in force when the record was written.
 */
export interface PersistedThrottler {
  readonly throttlerId: string;
  /**
   * Set on the record of one key of a keyed throttler (record `bucket/<throttler id>/<key>`, §9.2):
   * that key's balance and the rate it refilled at. Only a key whose bucket is not full has a record;
   * a full key is the same as a forgotten one, so its record is deleted (a tombstone).
   */
  readonly key?: string;
  /** A rate bucket's balance and the controller-clock time it was read at; null when it has none. */
  readonly balance: { readonly balance: number; readonly atMs: number } | null;
  /** Units per second the bucket refilled at when written (an adaptive limit included); null when unlimited. */
  readonly limitPerSecond: number | null;
  readonly leases?: PersistedLeases;
  readonly adaptive?: PersistedAdaptive;
  readonly generation: number;
  readonly writtenAtMs: number;
}

/** Who leads (record `leader`), announced by the leader itself once it serves; followers name it in `sluice-leader`. */
export interface LeaderRecord {
  /** host:port clients reach the leader at. */
  readonly address: string;
  readonly memberId: string;
  readonly generation: number;
  /** Epoch ms the leadership began. */
  readonly sinceMs: number;
}

/** The latest committed record of each key, in the store's order. */
export interface ControllerState {
  readonly spec: PersistedSpec | null;
  /** By throttler id: the records without a `key`. */
  readonly throttlers: ReadonlyMap<string, PersistedThrottler>;
  /** The keyed throttlers' per-key records, by throttler id then key. */
  readonly keys: ReadonlyMap<string, ReadonlyMap<string, PersistedThrottler>>;
  readonly leader: LeaderRecord | null;
}

export const EMPTY_CONTROLLER_STATE: ControllerState = Object.freeze({ spec: null, throttlers: new Map(), keys: new Map(), leader: null });

/** One key of a keyed throttler. */
export interface PersistedKeyId {
  readonly throttlerId: string;
  readonly key: string;
}

/**
 * A record's identity as one string (a throttler's, or a key's of a keyed throttler): distinct for
 * every pair of throttler id and key whatever characters they hold, for maps of records by identity.
 * The two kinds have their own prefix: a throttler may have any id, `["a","b"]` too.
 */
export function persistedRecordId(record: { readonly throttlerId: string; readonly key?: string | undefined }): string {
  return record.key === undefined ? `throttler:${record.throttlerId}` : `key:${JSON.stringify([record.throttlerId, record.key])}`;
}

/** What one write puts in the store, all or nothing (one transaction). */
export interface StateWrite {
  readonly spec?: PersistedSpec;
  readonly throttlers?: readonly PersistedThrottler[];
  /** Throttlers no longer declared: their records are deleted (a tombstone each). */
  readonly removedThrottlers?: readonly string[];
  /** Keys of keyed throttlers forgotten or full again (or of a removed throttler): a tombstone each. */
  readonly removedKeys?: readonly PersistedKeyId[];
  readonly leader?: LeaderRecord;
}

/**
 * The store refused a write because another controller took the writer's identity over since this
 * one claimed it (Kafka fenced its transactional producer): this controller no longer leads.
 */
export class StateWriterFencedError extends Error {
  override readonly name = "StateWriterFencedError";
}

export interface ControllerStateStore {
  /** Starts reading the state (idempotent). */
  start(): Promise<void>;
  /**
   * Claims the writer's identity for a new leadership, fencing every earlier holder (their open
   * writes are aborted, their later ones refused). A new leader calls it before it reads the state.
   */
  claimWriter(signal?: AbortSignal): Promise<void>;
  /**
   * Everything committed before this call, read back to the end: a new leader calls it (after
   * claimWriter) before it serves, so it continues from the last state its predecessor persisted.
   */
  catchUp(signal?: AbortSignal): Promise<ControllerState>;
  /** What has been read so far, without waiting (who leads, for followers). */
  latest(): ControllerState;
  /**
   * Writes the records in one committed transaction; resolves once the broker acknowledged it.
   * Rejects with StateWriterFencedError when another controller claimed the writer since.
   */
  write(records: StateWrite): Promise<void>;
  /** Idempotent. */
  close(): Promise<void>;
}
