// What the end-to-end tests of concurrency throttlers across processes share (concurrency-leases,
// concurrency-workers, concurrency-failover): a simulated cluster the tasks run on, the processes a
// test starts, and a gRPC client that reads a throttler from the controller's snapshot. All of it
// ends after the file.
import assert from "node:assert/strict";
import { after } from "node:test";
import type { ControllerSnapshot } from "@sluice/controller";
import { createGrpcQuotaClient, type QuotaServiceClient } from "@sluice/protocol";
import { SimulatedCluster } from "../../examples/cluster-admission/simulated-cluster.ts";
import { type Child, stopAll } from "./processes.ts";

/** A `kind: "concurrency"` throttler of the dynamic_spec: at most `limit` units held at once. */
export function concurrencyThrottlerSpec(limit: number, leaseMs: number) {
  return { kind: "concurrency", limit, lease_timeout: `${leaseMs}ms` } as const;
}

export function concurrencyTestBed(clusterName: string) {
  const children: Child[] = [];
  const cluster = new SimulatedCluster({ cores: 64, name: clusterName });
  let client: QuotaServiceClient | undefined;

  after(async () => {
    await stopAll(children, 0);
    client?.close();
    await cluster.stop();
  });

  return {
    cluster,
    /** Started processes, SIGKILLed after the file. */
    children,
    /** Reads throttlers from the controller at `address` from now on. */
    connect(address: string): void {
      client?.close();
      client = createGrpcQuotaClient(address);
    },
    /** Throttler `id` in the controller's snapshot (DescribeThrottlers over gRPC). */
    async throttler(id: string) {
      assert.ok(client, "connect() to the controller first");
      const { snapshotJson } = await client.describeThrottlers({ deadlineAt: Date.now() + 5_000 });
      const found = (JSON.parse(snapshotJson) as ControllerSnapshot).throttlers.find((x) => x.id === id);
      assert.ok(found, `throttler "${id}" is in the controller's snapshot`);
      return found;
    },
  };
}
