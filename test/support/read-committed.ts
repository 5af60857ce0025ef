import type { Kafka } from "kafkajs";
import { uniqueName } from "./kafka.ts";
import { ROOT, writeSpec } from "./processes.ts";

const RELAY = `${ROOT}/test/fixtures/relay-computation.ts`;

/**
 * The pipeline both exactly-once e2e tests run: Relay copies each input `{ id }` of a 6-partition
 * topic to a 6-partition output, 50 rows per batch, in one transaction per batch, at `rowsPerSecond`.
 * Returns the spec's path.
 */
export function exactlyOnceRelaySpec(o: { pipeline: string; brokers: readonly string[]; input: string; output: string; rowsPerSecond: number }): string {
  return writeSpec({
    pipeline: o.pipeline,
    kafka: { brokers: o.brokers, session_timeout: "6s" },
    streams: { input: { topic: o.input, partitions: 6 }, out: { topic: o.output, partitions: 6 } },
    computations: { Relay: { module: RELAY, inputs: ["input"], outputs: ["out"], max_rows_per_batch: 50, delivery: "exactly_once" } },
    dynamic_spec: {
      throttlers: { rows: { limit: o.rowsPerSecond, period: "1s", request_period: "200ms" } },
      computations: { Relay: { input_rows_throttler_id: "rows" } },
    },
  });
}

/** What test/fixtures/relay-computation.ts writes for each input `{ id }`. */
export interface Relayed {
  id: number;
  job: string;
  partition?: number;
  at?: number;
}

/** How long the reader's kafkajs disconnect may take before it is left behind (a broker that is down holds it). */
const DISCONNECT_TIMEOUT_MS = 10_000;

/**
 * Reads `topic` as a read_committed consumer until `count` distinct ids arrived, then `settleMs`
 * longer, so that a duplicate committed after the last new id is still seen. `out` fills as it reads.
 * A message read again at the same partition and offset (the reader itself rejoining after a broker
 * restart, from its own last auto-commit) is the same output, not a duplicate: it is kept once.
 * `signal` (an after hook's) ends the reading at once; the consumer's disconnect is bounded either way.
 */
export async function readCommitted(
  kafka: Kafka,
  topic: string,
  count: number,
  timeoutMs: number,
  settleMs: number,
  out: Relayed[],
  signal?: AbortSignal,
): Promise<Relayed[]> {
  const consumer = kafka.consumer({ groupId: uniqueName("reader"), readUncommitted: false });
  const ids = new Set<number>();
  const positions = new Set<string>();
  await consumer.connect();
  try {
    await consumer.subscribe({ topic, fromBeginning: true });
    let allSeen: () => void = () => {};
    const seen = new Promise<void>((resolve) => (allSeen = resolve));
    await consumer.run({
      eachMessage: async ({ partition, message }) => {
        const position = `${partition}/${message.offset}`;
        if (positions.has(position)) return;
        positions.add(position);
        const value = JSON.parse(message.value?.toString() ?? "null") as Relayed;
        out.push(value);
        ids.add(value.id);
        if (ids.size >= count) allSeen();
      },
    });
    await Promise.race([seen, sleep(timeoutMs, signal)]);
    await sleep(settleMs, signal);
    return out;
  } finally {
    let timer: NodeJS.Timeout | undefined;
    const timedOut = new Promise<void>((resolve) => {
      timer = setTimeout(resolve, DISCONNECT_TIMEOUT_MS);
    });
    await Promise.race([consumer.disconnect().catch(() => {}), timedOut]);
    clearTimeout(timer);
  }
}

/** Resolves after `ms`, or at once when `signal` aborts. */
function sleep(ms: number, signal?: AbortSignal): Promise<void> {
  return new Promise((resolve) => {
    const done = () => {
      clearTimeout(timer);
      signal?.removeEventListener("abort", done);
      resolve();
    };
    const timer = setTimeout(done, ms);
    signal?.addEventListener("abort", done, { once: true });
    if (signal?.aborted) done();
  });
}

/** Ids 0..count-1 that `out` lacks, and those it has more than once (with how often). */
export function exactlyOnceReport(out: readonly Relayed[], count: number): { missing: number[]; repeated: [number, number][] } {
  const perId = new Map<number, number>();
  for (const m of out) perId.set(m.id, (perId.get(m.id) ?? 0) + 1);
  const missing = Array.from({ length: count }, (_, i) => i).filter((i) => !perId.has(i));
  const repeated = [...perId].filter(([, n]) => n > 1);
  return { missing, repeated };
}
