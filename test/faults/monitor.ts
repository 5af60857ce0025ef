// The harness's own client of the group while faults run: it asks the serving leader for its
// dynamic_spec version and adaptive limits (recorded as `spec` and `limit` events), and reconfigures
// live through UpdateDynamicSpec (recorded as `reconfigure` events with the version answered), so the
// checker can tell whether a version ever goes backwards.
import { createGrpcQuotaClient, createLeaderFollowingClient } from "@sluice/protocol";
import type { FaultCluster } from "./cluster.ts";
import type { HistoryWriter } from "./history.ts";

const sleep = (ms: number, signal: AbortSignal) =>
  new Promise<void>((resolve) => {
    const done = () => {
      clearTimeout(timer);
      signal.removeEventListener("abort", done);
      resolve();
    };
    const timer = setTimeout(done, ms);
    signal.addEventListener("abort", done, { once: true });
  });

export interface MonitorOptions {
  readonly cluster: FaultCluster;
  readonly history: HistoryWriter;
  readonly adaptiveIds: readonly string[];
  /** The dynamic_spec of reconfiguration n (the harness changes max_queue_size: nothing the bounds depend on). */
  readonly reconfigured: (n: number) => unknown;
  readonly pollMs: number;
  readonly reconfigureEveryMs: number;
  readonly log: (line: string) => void;
}

/** Runs until `signal` aborts; resolves then. */
export async function monitor(options: MonitorOptions, signal: AbortSignal): Promise<void> {
  await Promise.all([pollLeader(options, signal), reconfigureLoop(options, signal)]);
}

async function pollLeader(options: MonitorOptions, signal: AbortSignal): Promise<void> {
  const { cluster, history } = options;
  while (!signal.aborted) {
    const sentAt = { value: Date.now() };
    const found = await cluster.leader([], sentAt).catch(() => null);
    if (found) {
      history.write({ type: "spec", at: sentAt.value, source: "leader", who: found.slot.address, version: found.snapshot.version });
      for (const t of found.snapshot.throttlers) {
        if (options.adaptiveIds.includes(t.id) && typeof t.limit === "number")
          history.write({ type: "limit", at: sentAt.value, throttler: t.id, limit: t.limit });
      }
    }
    await sleep(options.pollMs, signal);
  }
}

async function reconfigureLoop(options: MonitorOptions, signal: AbortSignal): Promise<void> {
  const client = createLeaderFollowingClient(options.cluster.addresses, { connect: (a) => createGrpcQuotaClient(a) });
  let n = 0;
  try {
    while (!signal.aborted) {
      await sleep(options.reconfigureEveryMs, signal);
      if (signal.aborted) break;
      n++;
      const sentAt = Date.now();
      try {
        const { version } = await client.updateDynamicSpec(JSON.stringify(options.reconfigured(n)), { deadlineAt: Date.now() + 5_000 });
        options.history.write({ type: "reconfigure", at: Date.now(), sentAt, version });
        options.log(`reconfigure #${n}: version ${version}`);
      } catch (error) {
        // No leader just now (a fault): nothing was acknowledged, so nothing can be lost.
        options.log(`reconfigure #${n} not acknowledged: ${error instanceof Error ? error.message.split("\n")[0] : String(error)}`);
      }
    }
  } finally {
    client.close();
  }
}
