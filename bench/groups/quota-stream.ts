// Group 8: the QuotaStream transport (issue #14) next to unary gRPC, run for run.
//   - memory: 100,000 requests waiting on QuotaStreams against 10,000 waiting as unary calls
//     (what the scale group measures; 100,000 unary calls would need a GiB);
//   - grants per controller CPU-second and open-loop latency over each transport, the load from
//     separate processes (quota-stream-throughput.ts).
import { systemClock } from "@sluice/core";
import { createGrpcQuotaClient, createStreamQuotaClient, type QuotaServiceClient } from "@sluice/protocol";
import { BenchChild, type ChildEvent } from "../lib/child.ts";
import { formatNumber } from "../lib/format.ts";
import type { BenchGroup, GroupContext } from "../lib/group.ts";
import { sleep } from "../lib/grpc-load.ts";
import { controllerSpec } from "../lib/specs.ts";
import { measureStreamThroughput, STREAM, UNARY } from "./quota-stream-throughput.ts";

/** Calls per stream in the memory run: ten workers' streams. */
const STREAM_CALLS_PER_CLIENT = 10_000;
/** As the scale group: one unary channel per 1,000 calls. */
const UNARY_CALLS_PER_CHANNEL = 1_000;

export const quotaStream: BenchGroup = {
  id: "stream",
  title: "8. QuotaStream: a worker's quota traffic on one multiplexed stream, next to unary gRPC",
  async run(g) {
    await g.inTurn([() => measureWaiting(g), () => measureStreamThroughput(g)]);
  },
};

type Connect = (address: string) => QuotaServiceClient;

interface WaitingRun {
  readonly requests: number;
  readonly heapPerRequestBytes: number;
  readonly rssMiB: number;
  readonly admitCpuUsPerRequest: number;
  readonly drainMs: number;
}

async function measureWaiting(g: GroupContext): Promise<void> {
  const reps = g.pick(2, 1);
  const streamRequests = g.pick(100_000, 2_000);
  const unaryRequests = g.pick(10_000, 1_000);
  const runs = new Map<string, WaitingRun[]>();
  g.log(`waiting: ${reps} runs, ${streamRequests.toLocaleString("en-US")} requests on streams, ${unaryRequests.toLocaleString("en-US")} as unary calls`);
  for (let rep = 0; rep < reps; rep++) {
    for (const subject of rep % 2 === 0 ? [STREAM, UNARY] : [UNARY, STREAM]) {
      const run =
        subject === STREAM
          ? await holdWaiting(streamRequests, STREAM_CALLS_PER_CLIENT, createStreamQuotaClient)
          : await holdWaiting(unaryRequests, UNARY_CALLS_PER_CHANNEL, (address) => createGrpcQuotaClient(address));
      runs.set(subject, [...(runs.get(subject) ?? []), run]);
      g.log(
        `run ${rep + 1} ${subject}: ${run.requests} waiting, ${formatNumber(run.heapPerRequestBytes)} B heap each, RSS ${formatNumber(run.rssMiB)} MiB, ` +
          `admit ${formatNumber(run.admitCpuUsPerRequest)} µs CPU each, drain ${formatNumber(run.drainMs)} ms`,
      );
    }
  }
  const of = (subject: string, pick: (run: WaitingRun) => number) => (runs.get(subject) ?? []).map(pick);
  const label = `${streamRequests.toLocaleString("en-US")} waiting requests on QuotaStreams (unary: ${unaryRequests.toLocaleString("en-US")})`;
  const figure = (id: string, what: string, unit: string, pick: (run: WaitingRun) => number, note?: string) =>
    g.add({
      id: `stream.waiting.${id}`,
      label: `${what}, ${label}`,
      unit,
      better: "lower",
      sluice: of(STREAM, pick),
      peers: { [UNARY]: of(UNARY, pick) },
      ...(note ? { note } : {}),
    });
  const heap = figure(
    "heap",
    "controller heap per waiting request",
    "bytes",
    (r) => r.heapPerRequestBytes,
    `heap used after a full GC, holding minus before, ÷ requests; 120 s deadlines, a client id per request; ${STREAM_CALLS_PER_CLIENT.toLocaleString("en-US")} calls per stream, ${UNARY_CALLS_PER_CHANNEL.toLocaleString("en-US")} unary calls per channel`,
  );
  figure("rss", "controller RSS", "MiB", (r) => r.rssMiB);
  figure("admit_cpu", "controller CPU to admit one request", "µs", (r) => r.admitCpuUsPerRequest);
  figure("drain", "time to answer all once the limit is lifted", "ms", (r) => r.drainMs);
  g.goal({
    id: "stream.waiting.heap",
    text: "≤ 2 KB of controller heap per waiting request on the stream transport, 100,000 waiting",
    figure: heap,
    value: heap.sluice?.median ?? null,
    target: 2048,
    compare: "<=",
  });
}

async function holdWaiting(requests: number, callsPerClient: number, connect: Connect): Promise<WaitingRun> {
  const child = BenchChild.start(
    "controller-process.ts",
    { mode: "sluice", spec: controllerSpec({ held: { limit: 0, max_queue_size: requests * 2 } }) },
    { nodeArgs: ["--expose-gc"] },
  );
  const clients: QuotaServiceClient[] = [];
  try {
    const address = String((await child.waitForType("ready", 30_000))["address"]);
    for (let i = 0; i < Math.ceil(requests / callsPerClient); i++) clients.push(connect(address));
    // One call first on each client, so that connecting (and opening the stream) is not counted.
    await Promise.all(
      clients.map((client) => client.releaseQuota({ throttlerId: "held", clientId: "warm-up", amount: 0, quotaClassId: "" }).catch(() => undefined)),
    );
    const base = await usage(child, true);
    const deadlineAt = systemClock.now() + 120_000;
    const calls: Promise<unknown>[] = [];
    for (let i = 0; i < requests; i++) {
      const client = clients[Math.floor(i / callsPerClient)] as QuotaServiceClient;
      const call = client.requestQuota(
        { throttlerId: "held", clientId: `client-${i}`, amount: 1, timestampMs: 1_700_000_000_000 + i, quotaClassId: "", requestId: `r-${i}` },
        { deadlineAt },
      );
      call.catch(() => undefined);
      calls.push(call);
      // Let the frames go out as they fill, as jobs issuing requests over time would.
      if (i % 5_000 === 4_999) await sleep(0);
    }
    for (let waited = 0; (await waitingCount(child)) < requests; waited += 50) {
      if (waited > 120_000) throw new Error(`only ${await waitingCount(child)} of ${requests} requests arrived`);
      await sleep(50);
    }
    const holding = await usage(child, true);
    const releasedAt = performance.now();
    child.send({ type: "update", dynamicSpecJson: JSON.stringify({ throttlers: { held: { max_queue_size: requests * 2 } }, computations: {} }) });
    await Promise.all(calls);
    return {
      requests,
      heapPerRequestBytes: (Number(holding["heapUsedBytes"]) - Number(base["heapUsedBytes"])) / requests,
      rssMiB: Number(holding["rssBytes"]) / 2 ** 20,
      admitCpuUsPerRequest: ((Number(holding["cpuMs"]) - Number(base["cpuMs"])) * 1000) / requests,
      drainMs: performance.now() - releasedAt,
    };
  } finally {
    for (const client of clients) client.close();
    await child.stop();
  }
}

async function waitingCount(child: BenchChild): Promise<number> {
  const snapshot = JSON.parse(String((await child.request({ type: "describe" }))["snapshotJson"])) as { throttlers: { pendingRequests: number }[] };
  return snapshot.throttlers.reduce((sum, t) => sum + t.pendingRequests, 0);
}

function usage(child: BenchChild, collect: boolean): Promise<ChildEvent> {
  return child.request({ type: "usage", collect });
}
