// services: processes
// docs/design.md §5.3, issue 19 item 6: a real `sluice controller` child under 100,000 QuotaStream calls
// whose answers are never read (a raw HTTP/2 client) stays under 300 MB RSS and keeps serving a
// well-behaved client. The RSS is read from /proc (VmRSS, sampled, and the kernel's peak VmHWM), so
// the bound holds however loaded the machine is; only the well-behaved client's wait has a (generous) timeout.
import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { after, it } from "node:test";
import { createStreamQuotaClient } from "@sluice/protocol";
import { NOOP_COMPUTATION, startController, writeSpec, type Child } from "../support/processes.ts";
import { unreadQuotaStreams } from "../support/unread-quota-stream.ts";

const RSS_BOUND_MB = 300;
const STREAMS = 20;
const CALLS_PER_STREAM = 5_000; // past the default bound of 4,096: each stream also has calls to refuse

const children: Child[] = [];
after(() => {
  for (const child of children) child.kill("SIGKILL");
});

/** VmRSS and VmHWM (peak) of a process, in MB. */
function memoryOf(pid: number): { rss: number; peak: number } {
  const status = readFileSync(`/proc/${pid}/status`, "utf8");
  const kb = (field: string) => Number(new RegExp(`^${field}:\\s+(\\d+) kB`, "m").exec(status)?.[1] ?? Number.NaN);
  return { rss: kb("VmRSS") / 1024, peak: kb("VmHWM") / 1024 };
}

it("a controller under 100,000 unread QuotaStream calls stays under 300 MB RSS and keeps serving another client", async () => {
  // A large dynamic_spec, so that every watch's answer is big (each carries the whole spec).
  const throttlers = Object.fromEntries(
    Array.from({ length: 120 }, (_, i) => [`hostile_${i}`, { limit: 100 + i, period: "1s", classes: { gold: { weight: 2 } } }]),
  );
  const spec = writeSpec({
    pipeline: "quota-stream-hostile",
    streams: { input: { topic: "input" } },
    computations: { Reader: { module: NOOP_COMPUTATION, inputs: ["input"] } },
    dynamic_spec: { throttlers: { ...throttlers, served: { limit: 1_000, period: "1s" } }, computations: {} },
  });
  const controller = await startController(spec);
  children.push(controller.child);
  const baseline = memoryOf(controller.child.pid);

  const hostile = unreadQuotaStreams(controller.address, { streams: STREAMS, callsPerStream: CALLS_PER_STREAM, perFrame: 1_000 });
  let worst = baseline.rss;
  let over: string | null = null;
  const sampler = setInterval(() => {
    const { rss } = memoryOf(controller.child.pid);
    worst = Math.max(worst, rss);
    // Past the bound there is nothing left to learn: stop the child before it takes the machine's memory.
    if (rss > RSS_BOUND_MB && over === null) {
      over = `RSS ${rss.toFixed(0)} MB`;
      controller.child.kill("SIGKILL");
    }
  }, 100);
  const client = createStreamQuotaClient(controller.address);
  const overFirst = (error: unknown) => {
    // A controller stopped for passing the bound fails the good client too: the bound is the news.
    if (over !== null) assert.fail(`the controller passed ${RSS_BOUND_MB} MB (${over}); then: ${error instanceof Error ? error.message : String(error)}`);
    throw error;
  };
  try {
    // Let the hostile calls land (the controller reads what it can; its answers back up).
    await new Promise((resolve) => setTimeout(resolve, 5_000));
    assert.equal(over, null, `the controller passed ${RSS_BOUND_MB} MB: ${over}`);

    // A well-behaved client on its own stream is served: grants and a watch.
    const startedAt = performance.now();
    const grants = await Promise.all(
      Array.from({ length: 50 }, (_, i) =>
        client.requestQuota(
          { throttlerId: "served", clientId: "good/0", amount: 1, timestampMs: 0, quotaClassId: "", requestId: `good-${i}` },
          { deadlineAt: Date.now() + 30_000 },
        ),
      ),
    ).catch(overFirst);
    assert.equal(
      grants.reduce((sum, g) => sum + g.granted, 0),
      50,
    );
    const watched = new AbortController();
    let version = 0;
    const watching = client.watchDynamicSpec(
      "good",
      (update) => {
        version = update.version;
        watched.abort();
      },
      watched.signal,
    );
    await watching.catch(overFirst);
    assert.equal(version, 1, "the good client's watch got the spec");
    const servedMs = performance.now() - startedAt;

    await new Promise((resolve) => setTimeout(resolve, 2_000));
    assert.equal(over, null, `the controller passed ${RSS_BOUND_MB} MB: ${over}`);
    const end = memoryOf(controller.child.pid);
    console.log(
      `controller RSS: baseline ${baseline.rss.toFixed(0)} MB, worst sampled ${worst.toFixed(0)} MB, peak (VmHWM) ${end.peak.toFixed(0)} MB, ` +
        `now ${end.rss.toFixed(0)} MB under ${STREAMS * CALLS_PER_STREAM} unread calls (${hostile.framesWritten} frames written); good client served in ${servedMs.toFixed(0)} ms`,
    );
    assert.ok(end.peak < RSS_BOUND_MB, `peak RSS ${end.peak.toFixed(0)} MB, bound ${RSS_BOUND_MB} MB`);
  } finally {
    clearInterval(sampler);
    client.close();
    hostile.close();
  }
});
