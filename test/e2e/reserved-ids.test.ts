// services: processes
// docs/design.md §5.3, issue 19 item 8, end to end: a real `sluice controller` child and @sluice/client over
// gRPC, with a throttler named "constructor", classes "prototype" and "constructor", and a client
// (and request ids) named "__proto__": they are served, counted and described like any other ids.
import assert from "node:assert/strict";
import { after, it } from "node:test";
import { connectThrottlers } from "@sluice/client";
import { createGrpcQuotaClient } from "@sluice/protocol";
import { NOOP_COMPUTATION, startController, writeSpec, type Child } from "../support/processes.ts";

const children: Child[] = [];
after(() => {
  for (const child of children) child.kill("SIGKILL");
});

interface Described {
  throttlers: {
    id: string;
    inUse?: number;
    classes: { id: string; granted?: number; counters?: unknown }[];
    concurrency?: { holders: number; heldUnits: number };
  }[];
}

it("throttler, class and client ids named constructor, prototype and __proto__ work end to end", async () => {
  const spec = writeSpec({
    pipeline: "reserved-ids",
    streams: { input: { topic: "input" } },
    computations: { Reader: { module: NOOP_COMPUTATION, inputs: ["input"] } },
    dynamic_spec: {
      throttlers: {
        constructor: { limit: 1_000, period: "1s", classes: { prototype: { weight: 2 } } },
        prototype: { kind: "concurrency", limit: 5, classes: { constructor: { weight: 1 } } },
      },
      computations: {},
    },
  });
  const controller = await startController(spec);
  children.push(controller.child);
  const throttlers = await connectThrottlers({
    controller: controller.address,
    clientId: "__proto__",
    quotaClass: JSON.parse('{"constructor":"prototype","prototype":"constructor"}') as Record<string, string>,
    log: null,
  });
  const describe = createGrpcQuotaClient(controller.address);
  try {
    assert.deepEqual(Object.keys(throttlers.dynamicSpec.throttlers).sort(), ["constructor", "prototype"]);
    await throttlers.getThrottlerOrThrow("constructor").throttle(3);
    const slots = throttlers.getThrottlerOrThrow("prototype");
    await slots.throttle(3);
    const snapshot = JSON.parse((await describe.describeThrottlers()).snapshotJson) as Described;
    const held = snapshot.throttlers.find((t) => t.id === "prototype");
    assert.equal(held?.concurrency?.holders, 1, "the holder named __proto__ is counted");
    assert.equal(held?.concurrency?.heldUnits, 3);
    const rate = snapshot.throttlers.find((t) => t.id === "constructor");
    assert.deepEqual(rate?.classes.map((c) => c.id).sort(), ["default", "prototype"]);
    assert.throws(() => throttlers.getThrottlerOrThrow("hasOwnProperty"), /THROTTLER_NOT_DECLARED/);
    slots.release(3);
  } finally {
    describe.close();
    await throttlers.close();
  }
});
