// The loads the fault harness can put on the group (`--load`): the throttlers it declares, what
// the checker needs to know of them, and what each client process runs.
//   mixed              a rate, a concurrency and an adaptive throttler, every caller backlogged (default)
//   eight-concurrency  eight concurrency throttlers at 50 tasks/s each (issue #19's load: the one
//                      that made a 1.1 MB state record); every call must be granted
import { join } from "node:path";
import { ROOT } from "../support/processes.ts";
import type { ThrottlerInfo } from "./history.ts";

export const LOAD_SHAPES = ["mixed", "eight-concurrency"] as const;
export type LoadShapeName = (typeof LOAD_SHAPES)[number];

/** The concurrency throttlers' lease_timeout: short, so that their liveness after each fault is checked within a run. */
export const LEASE_TIMEOUT_MS = 10_000;

export interface LoadShape {
  /** The dynamic_spec's throttlers; `maxQueueSize` differs per reconfiguration (nothing a bound depends on). */
  readonly throttlers: (maxQueueSize: number) => Record<string, unknown>;
  readonly infos: ThrottlerInfo[];
  /** Per client process: concurrent callers per throttler id. */
  readonly callers: Record<string, number>;
  readonly concurrencyIds: string[];
  readonly adaptiveIds: string[];
  /** A concurrency unit is held for a time in [low, high] ms. */
  readonly holdMs: readonly [number, number];
  /** A caller starts at most one call per this many ms (none: back to back). */
  readonly paceMs?: number;
  /** Every call must be granted: a failed call fails the run (besides the invariants). */
  readonly everyCallGranted: boolean;
  readonly description: string;
}

const LOAD_MODULE = join(ROOT, "test/faults/load-module.mjs");
const common = { request_period: "200ms", rpc_timeout: "2s" };
const lease = `${LEASE_TIMEOUT_MS / 1000}s`;

function mixed(): LoadShape {
  return {
    throttlers: (maxQueueSize) => ({
      rate: { limit: 40, period: "1s", max_queue_size: maxQueueSize, ...common },
      slots: { kind: "concurrency", limit: 4, lease_timeout: lease, ...common },
      adaptive: {
        adaptive: { load: { module: LOAD_MODULE }, target: { low: 0.6, high: 0.8 }, initial_limit: 20, min_limit: 2, max_limit: 20, interval: "1s" },
        period: "1s",
        ...common,
      },
    }),
    infos: [
      { id: "rate", kind: "rate", limit: 40, periodMs: 1_000, smooth: false, requestPeriodMs: 200 },
      { id: "slots", kind: "concurrency", limit: 4, periodMs: 1_000, smooth: false, requestPeriodMs: 200, leaseTimeoutMs: LEASE_TIMEOUT_MS },
      { id: "adaptive", kind: "rate", limit: null, periodMs: 1_000, smooth: false, requestPeriodMs: 200, maxLimit: 20 },
    ],
    callers: { rate: 3, slots: 4, adaptive: 2 },
    concurrencyIds: ["slots"],
    adaptiveIds: ["adaptive"],
    holdMs: [20, 200],
    everyCallGranted: false,
    description: "rate (40/s), slots (concurrency 4), adaptive (2..20/s); every caller backlogged",
  };
}

/** Tasks per second per throttler, over all client processes. */
const TASKS_PER_SECOND = 50;
const EIGHT_LIMIT = 64;
const CALLERS_PER_CLIENT = 20;

function eightConcurrency(clients: number): LoadShape {
  const ids = Array.from({ length: 8 }, (_, i) => `tasks-${i}`);
  return {
    throttlers: (maxQueueSize) =>
      Object.fromEntries(ids.map((id) => [id, { kind: "concurrency", limit: EIGHT_LIMIT, lease_timeout: lease, max_queue_size: maxQueueSize, ...common }])),
    infos: ids.map((id) => ({
      id,
      kind: "concurrency",
      limit: EIGHT_LIMIT,
      periodMs: 1_000,
      smooth: false,
      requestPeriodMs: 200,
      leaseTimeoutMs: LEASE_TIMEOUT_MS,
    })),
    callers: Object.fromEntries(ids.map((id) => [id, CALLERS_PER_CLIENT])),
    concurrencyIds: ids,
    adaptiveIds: [],
    holdMs: [20, 200],
    // Each of clients × CALLERS_PER_CLIENT callers starts one task per paceMs: TASKS_PER_SECOND per throttler.
    paceMs: Math.round((1_000 * clients * CALLERS_PER_CLIENT) / TASKS_PER_SECOND),
    everyCallGranted: true,
    description: `8 concurrency throttlers (limit ${EIGHT_LIMIT}) at ${TASKS_PER_SECOND} tasks/s each, tasks of 20–200 ms`,
  };
}

export function loadShape(name: LoadShapeName, clients: number): LoadShape {
  return name === "eight-concurrency" ? eightConcurrency(clients) : mixed();
}
