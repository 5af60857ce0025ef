// services: processes, kafka
// docs/design.md §5.2, issue 12 item 3: one `sluice controller` with a `kafka` section persists its state in
// `<pipeline>.controller-state`, so a SIGKILL and restart is not a free bucket, and a
// reconfiguration made before it is still in force after it (its version continues). Real broker
// (KAFKA_BROKERS), real child processes, real gRPC; every process is ended by its own pid.
import assert from "node:assert/strict";
import { after, describe, it } from "node:test";
import { createGrpcQuotaClient, type QuotaServiceClient } from "@sluice/protocol";
import { brokers, uniqueName } from "../support/kafka.ts";
import { scrape } from "../support/prometheus.ts";
import { type Child, NOOP_COMPUTATION, sluice, writeSpec } from "../support/processes.ts";

const children: Child[] = [];
const clients: QuotaServiceClient[] = [];
after(() => {
  for (const child of children) child.kill("SIGKILL");
  for (const client of clients) client.close();
});

interface Snapshot {
  version: number;
  throttlers: { id: string; limit: number | null; capacity: number | null; balance: number | null }[];
  failover?: { role: string; leader: string | null };
}

async function startGroupController(specPath: string): Promise<{ child: Child; address: string; client: QuotaServiceClient; http: string }> {
  const child = sluice(["controller", specPath, "--port", "0", "--http-port", "0"]);
  children.push(child);
  const match = await child.waitFor(/listening on (127\.0\.0\.1:\d+)/);
  const address = match[1] ?? "";
  // A restarted member waits for the dead one's session (6 s) to expire before it is elected.
  await child.waitFor(/leader of pipeline .* in generation \d+/, 120_000);
  const http = (await child.waitFor(/dashboard on (http:\/\/127\.0\.0\.1:\d+\/)/))[1] ?? "";
  const client = createGrpcQuotaClient(address);
  clients.push(client);
  return { child, address, client, http };
}

async function snapshotOf(client: QuotaServiceClient): Promise<Snapshot> {
  return JSON.parse((await client.describeThrottlers()).snapshotJson) as Snapshot;
}

describe("a single controller with Kafka restarts from its persisted state", { timeout: 300_000 }, () => {
  it("does not start full after draining, SIGKILL and restart; the reconfigured version survives", async () => {
    const pipeline = uniqueName("restart");
    const specPath = writeSpec({
      pipeline,
      kafka: { brokers: await brokers(), session_timeout: "6s" },
      streams: { input: { topic: `${pipeline}-input` } },
      computations: { Reader: { module: NOOP_COMPUTATION, inputs: ["input"] } },
      dynamic_spec: { throttlers: { rows: { limit: 5, period: "60s" } } },
    });

    const first = await startGroupController(specPath);
    // Reconfigure (version 2): limit 10/s, capacity 10 × 60 s = 600.
    const reconfigured = { throttlers: { rows: { limit: 10, period: "60s" } } };
    assert.equal((await first.client.updateDynamicSpec(JSON.stringify(reconfigured))).version, 2);
    const full = await snapshotOf(first.client);
    assert.equal(full.throttlers[0]?.capacity, 600);
    // Drain the bucket (pay-after: the whole 600 is granted at once).
    const grant = await first.client.requestQuota({
      throttlerId: "rows",
      clientId: "test",
      amount: 600,
      timestampMs: 0,
      quotaClassId: "",
      requestId: "drain-1",
    });
    assert.equal(grant.granted, 600);
    const drainedAt = Date.now();
    first.child.kill("SIGKILL");
    await first.child.exited;

    const second = await startGroupController(specPath);
    const restored = await snapshotOf(second.client);
    const elapsedS = (Date.now() - drainedAt) / 1000;
    const rows = restored.throttlers.find((t) => t.id === "rows");
    assert.equal(restored.version, 2, "the reconfiguration made before the restart is still in force (version continues)");
    assert.equal(rows?.limit, 10);
    assert.equal(restored.failover?.role, "leader");
    // Never fuller than the drained balance (≈ 0) plus what accrued since at 10/s; a free bucket would be 600.
    const balance = rows?.balance ?? Number.NaN;
    assert.ok(balance <= 10 * elapsedS + 1, `balance ${balance} after ${elapsedS.toFixed(1)} s should be ≤ ${(10 * elapsedS + 1).toFixed(0)} (not a full 600)`);
    assert.ok(balance < 300, `balance ${balance} is far from full`);
    assert.match(second.child.stdout, /restored 1 bucket balance persisted \d+ ms ago/);
    assert.match(second.child.stdout, /dynamic_spec version 2 \(persisted\)/);

    // Visible (issue 12 item 4): /metrics, the dashboard's snapshot and `sluice top` say who leads.
    const metrics = await scrape(`${second.http}metrics`);
    const value = (name: string) => metrics.samples.find((sample) => sample.name === name)?.value;
    assert.equal(value("sluice_controller_failover_leader"), 1);
    assert.ok((value("sluice_controller_failover_elections_total") ?? 0) >= 1);
    assert.ok((value("sluice_controller_failover_state_age_seconds") ?? -1) >= 0);
    assert.ok((value("sluice_controller_failover_leader_since_seconds") ?? 0) * 1000 <= Date.now());
    const top = sluice(["top", "--once", "--controller", second.address]);
    children.push(top);
    assert.equal((await top.exited).code, 0, top.stderr);
    assert.match(top.stdout, new RegExp(`leader ${second.address.replace(/\./g, "\\.")} since .* · leader here · generation \\d+ · \\d+ elections? seen`));

    // A later reconfiguration continues from the persisted version.
    assert.equal((await second.client.updateDynamicSpec(JSON.stringify(reconfigured))).version, 3);
    second.child.kill("SIGTERM");
    await second.child.exited;
  });
});
