import { createGrpcQuotaClient, type QuotaServiceClient } from "@sluice/protocol";

export interface LoadResult {
  /** Calls answered inside the measured window. */
  readonly calls: number;
  readonly windowMs: number;
  /** Latency of every call answered inside the window, ms. */
  readonly latenciesMs: Float64Array;
  readonly errors: number;
  readonly firstError: string | null;
}

/** One worker process holds one channel for its jobs; here one channel serves up to this many callers. */
export const CALLERS_PER_CHANNEL = 16;

/**
 * Closed-loop RequestQuota load: `clients` callers, each sending its next request as soon as the
 * last was answered, through Sluice's own gRPC client. Calls that finish during the warm-up are
 * not counted; the window's figures count only calls answered inside it.
 */
export async function closedLoopLoad(options: {
  readonly address: string;
  readonly throttlerId: string;
  readonly clients: number;
  readonly warmupMs: number;
  readonly windowMs: number;
  readonly amount?: number;
  /** Throttler id per call, for spreading load over many throttlers. */
  readonly pickThrottler?: (caller: number, call: number) => string;
  /** Called at the start and end of the window (to read the server's CPU counters). */
  readonly onWindow?: (edge: "start" | "end") => Promise<void>;
  /** How each channel's client is made (default: unary gRPC); e.g. createStreamQuotaClient. */
  readonly connect?: (address: string) => QuotaServiceClient;
  /**
   * Quick mode, where this process's event loop is shared with the rest of the suite: the warm-up
   * starts once a call was answered, and the window stays open past `windowMs` until it has
   * counted one (its rate is still calls over the window's actual length).
   */
  readonly gated?: boolean;
}): Promise<LoadResult> {
  const connect = options.connect ?? ((address: string) => createGrpcQuotaClient(address));
  const channels: QuotaServiceClient[] = Array.from({ length: Math.ceil(options.clients / CALLERS_PER_CHANNEL) }, () => connect(options.address));
  let measuring = false;
  let stopping = false;
  let calls = 0;
  let answered = 0;
  let errors = 0;
  let firstError: string | null = null;
  const latencies: number[] = [];
  const callers = Array.from({ length: options.clients }, async (_, caller) => {
    const channel = channels[Math.floor(caller / CALLERS_PER_CHANNEL)];
    if (!channel) return;
    for (let i = 0; !stopping; i++) {
      const sentAt = performance.now();
      try {
        await channel.requestQuota({
          throttlerId: options.pickThrottler?.(caller, i) ?? options.throttlerId,
          clientId: `load/${caller}`,
          amount: options.amount ?? 1,
          timestampMs: 0,
          quotaClassId: "",
          requestId: `${caller}-${i}`,
        });
        answered += 1;
        if (measuring) {
          calls += 1;
          latencies.push(performance.now() - sentAt);
        }
      } catch (error) {
        errors += 1;
        firstError ??= error instanceof Error ? error.message : String(error);
        if (errors > 1000) stopping = true;
      }
    }
  });
  const until = async (done: () => boolean) => {
    while (options.gated && !done() && !stopping) await sleep(10);
  };
  await until(() => answered > 0);
  await sleep(options.warmupMs);
  await options.onWindow?.("start");
  measuring = true;
  const startedAt = performance.now();
  await sleep(options.windowMs);
  await until(() => calls > 0);
  measuring = false;
  const windowMs = performance.now() - startedAt;
  await options.onWindow?.("end");
  stopping = true;
  await Promise.all(callers);
  for (const channel of channels) channel.close();
  return { calls, windowMs, latenciesMs: Float64Array.from(latencies), errors, firstError };
}

export function sleep(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms));
}
