import type { KeyableThrottler } from "@sluice/core";

/** A decoded input message, as user code sees it (docs/design.md §10). */
export interface Message<V = unknown> {
  readonly stream: string;
  readonly key: string | null;
  /** Decoded by the stream's format: JSON value, string, or bytes. */
  readonly value: V;
  readonly headers: Readonly<Record<string, string>>;
  readonly partition: number;
  readonly offset: string;
  /** Event timestamp, epoch ms. */
  readonly timestampMs: number;
  /** Serialized size of key + value + headers, before compression; what bytes throttlers meter. */
  readonly byteSize: number;
}

/** One Process iteration's input: at most `max_rows_per_batch` messages of one partition. */
export interface Batch<V = unknown> {
  readonly stream: string;
  readonly partition: number;
  readonly messages: readonly Message<V>[];
}

/** A message a computation emits; encoded by the output stream's format. */
export interface OutputMessage {
  readonly key?: string | null;
  readonly value: unknown;
  readonly headers?: Readonly<Record<string, string>>;
  /** Explicit partition; otherwise by key. */
  readonly partition?: number;
  readonly timestampMs?: number;
}

export interface Logger {
  info(message: string): void;
  warn(message: string): void;
  error(message: string): void;
}

/** What user code gets: identity, throttlers, output, logging. One per job. */
export interface RuntimeContext {
  readonly pipeline: string;
  readonly computation: string;
  readonly partition: number;
  readonly workerId: string;
  /** "<worker>/<computation>/<partition>": also the client id sent to the controller. */
  readonly jobId: string;
  readonly log: Logger;
  /** Aborts when the job stops (rebalance, shutdown); pass it to long waits. */
  readonly signal: AbortSignal;
  /**
   * A handle that stays valid across reconfiguration; throws THROTTLER_NOT_DECLARED. On a keyed
   * throttler (docs/design.md §11.4), `forKey(key)` is a handle on that key's own bucket.
   */
  getThrottlerOrThrow(throttlerId: string): KeyableThrottler;
  /** The handle, or null when the throttler is not declared now (ask again after a reconfiguration). */
  tryGetThrottler(throttlerId: string): KeyableThrottler | null;
  /** Buffers a message for `stream`; sent and acknowledged after `process` returns, before the commit. */
  emit(stream: string, message: OutputMessage): void;
}

export interface ComputationDefinition<V = unknown> {
  /** Once per job, before its first iteration: take handles, open connections. */
  init?(ctx: RuntimeContext): Promise<void> | void;
  /** One Process iteration. Throwing fails the job; it restarts from the last commit with backoff. */
  process(batch: Batch<V>, ctx: RuntimeContext): Promise<void> | void;
  /** Once per job, when it stops. */
  close?(ctx: RuntimeContext): Promise<void> | void;
}

/** The brand the CLI's spec validation checks, without importing the runtime. */
export const COMPUTATION_BRAND = Symbol.for("sluice.computation");

export type Computation<V = unknown> = ComputationDefinition<V> & { readonly [COMPUTATION_BRAND]: true };

export function defineComputation<V = unknown>(definition: ComputationDefinition<V>): Computation<V> {
  if (typeof definition?.process !== "function") {
    throw new TypeError("defineComputation needs an object with a process(batch, ctx) function");
  }
  return Object.freeze({ ...definition, [COMPUTATION_BRAND]: true as const });
}

export function isComputation(value: unknown): value is Computation {
  return typeof value === "object" && value !== null && (value as Record<symbol, unknown>)[COMPUTATION_BRAND] === true;
}
