// services: kafka
// One time base for the leader's lease (docs/design.md §5.3): kafkajs stamps its requests with `Date.now()`,
// the controller's clock is monotonic (performance.timeOrigin + performance.now()). After the wall
// clock steps back (NTP), the two differ by the step; a lease that compared them directly saw every
// heartbeat as sent long ago and fenced the elected leader on every tick: no leader at all. Here the
// controller's clock runs 6 s ahead of Date.now() — what a step back of the wall clock by 6 s
// leaves — with a lease of 3 s, on a real broker's group membership.
import assert from "node:assert/strict";
import { after, describe, it } from "node:test";
import { systemClock, type Clock } from "@sluice/core";
import { FailoverController } from "@sluice/controller";
import { KafkaControllerElection, KafkaControllerStateStore } from "@sluice/kafka";
import { dynamicSpecSchema } from "@sluice/spec";
import { kafka, uniqueName } from "../support/kafka.ts";

const STEP_MS = 6_000;
const LEASE_MS = 3_000;
const stepped: Clock = { now: () => systemClock.now() + STEP_MS, sleep: (ms, signal) => systemClock.sleep(ms, signal) };

const closing: (() => Promise<void>)[] = [];
after(async () => {
  for (const close of closing) await close();
});

describe("the leader's lease on one time base", () => {
  it("with the wall clock 6 s behind the controller's clock, the elected controller leads and keeps serving past several leases", async () => {
    const pipeline = uniqueName("lease-clock");
    const client = await kafka();
    const lines: string[] = [];
    const controller = new FailoverController({
      pipeline,
      dynamicSpec: dynamicSpecSchema.parse({ throttlers: { rows: { limit: 1_000, period: "1s" } } }),
      computations: [],
      clock: stepped,
      address: "127.0.0.1:7001",
      store: new KafkaControllerStateStore({ kafka: client, pipeline }),
      election: new KafkaControllerElection({ kafka: client, pipeline, address: "127.0.0.1:7001", sessionTimeoutMs: 6_000, clock: stepped }),
      leaseMs: LEASE_MS,
      log: (line) => lines.push(line),
    });
    closing.push(() => controller.close());
    await controller.start();
    const deadline = Date.now() + 40_000;
    while (controller.status().role !== "leader" && Date.now() < deadline) await new Promise((resolve) => setTimeout(resolve, 100));
    assert.equal(controller.status().role, "leader", lines.join("\n"));
    // Three leases long: heartbeats must renew it, measured on the one clock.
    const context = { deadlineAt: null, signal: new AbortController().signal, metadata: {} };
    for (let i = 0; i < 9; i++) {
      await new Promise((resolve) => setTimeout(resolve, 1_000));
      const granted = await controller.requestQuota(
        { throttlerId: "rows", clientId: "c", amount: 1, timestampMs: 0, quotaClassId: "", requestId: `r${i}` },
        context,
      );
      assert.equal(granted.granted, 1, `second ${i + 1}: ${lines.join("\n")}`);
    }
    assert.ok(!lines.some((l) => l.includes("lapsed")), lines.join("\n"));
  });
});
