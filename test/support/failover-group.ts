// Helpers of the failover e2e tests (docs/design.md §5.2): free loopback ports for the controllers of a
// group (they must be in the spec before the controllers start), starting those controllers, and a
// poll for the one that leads.
import { createServer, type Server } from "node:net";
import { createGrpcQuotaClient } from "@sluice/protocol";
import { sluice, type Child } from "./processes.ts";

/** Free loopback ports for the controllers, which must be in the spec before they start. */
export async function freePorts(count: number): Promise<number[]> {
  // Every listener stays open until all ports are known: closed one by one, the OS may hand the
  // same ephemeral port out twice (a run of the fault harness got two controllers on one port).
  const servers: Server[] = [];
  try {
    const ports: number[] = [];
    for (let i = 0; i < count; i++) {
      const server = createServer();
      servers.push(server);
      ports.push(
        await new Promise<number>((resolve, reject) => {
          server.once("error", reject);
          server.listen(0, "127.0.0.1", () => {
            const address = server.address();
            resolve(typeof address === "object" && address !== null ? address.port : 0);
          });
        }),
      );
    }
    return ports;
  } finally {
    await Promise.all(servers.map((server) => new Promise<void>((resolve) => (server.listening ? server.close(() => resolve()) : resolve()))));
  }
}

/**
 * Starts a `sluice controller` of `spec` on the port of each address (pushed onto `children`, for the
 * test's cleanup) and waits until every one listens; the map is by address.
 */
export async function startControllers(spec: string, addresses: readonly string[], children: Child[]): Promise<Map<string, Child>> {
  const controllers = new Map<string, Child>();
  for (const address of addresses) {
    const child = sluice(["controller", spec, "--port", address.split(":")[1] ?? "0"]);
    children.push(child);
    controllers.set(address, child);
  }
  await Promise.all([...controllers.values()].map((c) => c.waitFor(/listening on/, 120_000)));
  return controllers;
}

/** Polls until a controller answers DescribeThrottlers as the leader; resolves with its address and snapshot. */
export async function servingLeader<S extends { failover?: { role: string } }>(
  group: { readonly addresses: readonly string[] },
  exclude: string | null,
  timeoutMs: number,
): Promise<{ address: string; snapshot: S }> {
  const deadline = Date.now() + timeoutMs;
  const direct = new Map(group.addresses.map((a) => [a, createGrpcQuotaClient(a)]));
  try {
    for (;;) {
      for (const [address, client] of direct) {
        if (address === exclude) continue;
        try {
          const { snapshotJson } = await client.describeThrottlers({ deadlineAt: Date.now() + 500 });
          const snapshot = JSON.parse(snapshotJson) as S;
          if (snapshot.failover?.role === "leader") return { address, snapshot };
        } catch {
          /* a follower refuses; a dead or paused one does not answer */
        }
      }
      if (Date.now() > deadline) throw new Error(`no controller served as leader within ${timeoutMs} ms`);
      await new Promise((r) => setTimeout(r, 100));
    }
  } finally {
    for (const client of direct.values()) client.close();
  }
}
