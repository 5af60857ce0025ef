import { mkdtempSync, readFileSync, writeFileSync } from "node:fs";
import { createServer } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import type { ControllerSnapshot, ControllerThrottlerSnapshot } from "@sluice/controller";
import type { QuotaServiceClient } from "@sluice/protocol";
import { ROOT } from "./processes.ts";

// What the adaptive-limit end-to-end tests share: a copy of examples/cluster-admission pointed at a
// test's own Prometheus and cluster, and a sampler of the controller's DescribeThrottlers.

export const EXAMPLE_DIR = join(ROOT, "examples/cluster-admission");

/** A free TCP port on 127.0.0.1 (for servers that cannot be told port 0, like Prometheus). */
export async function freePort(): Promise<number> {
  return new Promise((done, fail) => {
    const server = createServer();
    server.once("error", fail);
    server.listen(0, "127.0.0.1", () => {
      const address = server.address();
      const port = typeof address === "object" && address ? address.port : 0;
      server.close(() => done(port));
    });
  });
}

/**
 * The example's pipeline in a temp dir, its modules named by absolute path (so that they still
 * resolve @sluice/runtime from the example's package), with the throttler's Prometheus URL and
 * query pointed at this test's, and `adaptive` fields overridden.
 */
export function examplePipeline(patch: { prometheusUrl: string; clusterName: string; adaptive?: Record<string, unknown> }): {
  path: string;
  spec: { dynamic_spec: { throttlers: Record<string, Record<string, unknown>> } };
} {
  const dir = mkdtempSync(join(tmpdir(), "sluice-adaptive-"));
  const spec = JSON.parse(readFileSync(join(EXAMPLE_DIR, "pipeline.json"), "utf8"));
  spec.streams.tasks.generator.module = join(EXAMPLE_DIR, "tasks.ts");
  spec.computations.Admitter.module = join(EXAMPLE_DIR, "admitter.ts");
  const throttler = spec.dynamic_spec.throttlers.cluster_tasks;
  throttler.adaptive.load.prometheus = {
    url: patch.prometheusUrl,
    query: `avg_over_time(cluster_cpu_utilisation{cluster="${patch.clusterName}"}[4s])`,
  };
  Object.assign(throttler.adaptive, patch.adaptive ?? {});
  const path = join(dir, "pipeline.json");
  writeFileSync(path, JSON.stringify(spec, null, 2));
  return { path, spec };
}

export interface Sample {
  readonly at: number;
  readonly limit: number | null;
  readonly suggested: number | null;
  readonly load: number | null;
  readonly lastDecisionAt: number | null;
  readonly inUse: number | null;
}

/** Polls DescribeThrottlers for one throttler every `everyMs` until stopped. */
export class SnapshotSampler {
  readonly samples: Sample[] = [];
  private timer: NodeJS.Timeout | null = null;

  constructor(
    private readonly client: QuotaServiceClient,
    private readonly throttlerId: string,
  ) {}

  async now(): Promise<ControllerThrottlerSnapshot> {
    const { snapshotJson } = await this.client.describeThrottlers({ deadlineAt: Date.now() + 5_000 });
    const snapshot = JSON.parse(snapshotJson) as ControllerSnapshot;
    const throttler = snapshot.throttlers.find((t) => t.id === this.throttlerId);
    if (!throttler) throw new Error(`no throttler ${this.throttlerId} in DescribeThrottlers`);
    return throttler;
  }

  start(everyMs = 250): void {
    this.timer = setInterval(() => {
      this.now().then(
        (t) =>
          this.samples.push({
            at: Date.now(),
            limit: t.limit,
            suggested: t.adaptive?.suggestedLimit ?? null,
            load: t.adaptive?.load ?? null,
            lastDecisionAt: t.adaptive?.lastDecisionAt ?? null,
            inUse: t.inUse ?? null,
          }),
        () => {},
      );
    }, everyMs);
  }

  stop(): void {
    if (this.timer) clearInterval(this.timer);
    this.timer = null;
  }

  /** One sample per decision of the loop (the reading it acted on), in order, from `since`. */
  decisions(since = 0): Sample[] {
    const seen = new Set<number>();
    return this.samples.filter((s) => {
      if (s.lastDecisionAt === null || s.lastDecisionAt < since || seen.has(s.lastDecisionAt)) return false;
      seen.add(s.lastDecisionAt);
      return true;
    });
  }
}

/** Polls until `check` holds; fails with `what` after `timeoutMs`. */
export async function waitUntil<T>(what: string, timeoutMs: number, check: () => Promise<T | undefined> | T | undefined, everyMs = 200): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const value = await check();
    if (value !== undefined) return value;
    if (Date.now() > deadline) throw new Error(`${what}: not within ${timeoutMs} ms`);
    await new Promise((done) => setTimeout(done, everyMs));
  }
}
