// slow: started first on a fresh clone (scripts/run-test-files.mjs)
// own process: its resets count per connection, and its bursts must not wait behind other files
import assert from "node:assert/strict";
import { after, before, describe, it } from "node:test";
import { isSluiceError } from "@sluice/core";
import { createGrpcQuotaClient, type QuotaServiceClient } from "@sluice/protocol";
import { validatePipelineSpec } from "@sluice/spec";
import { startController, type RunningController } from "../src/index.ts";

// Bursts of RequestQuota calls that all reach a 50 ms deadline, over real gRPC on loopback. Before
// the caller's deadline travelled to the controller (protocol/src/call-deadline.ts), every such
// call ended with the client resetting its stream; past ~1000 resets on a connection the
// controller's HTTP/2 layer answered GOAWAY INTERNAL_ERROR, and every other call on that connection
// — a long wait of another job included — failed with INTERNAL (seen as CONTROLLER_UNAVAILABLE).
// 2,400 calls per case were enough to cross that line every time; each case takes a few seconds.
// They go in bursts of 50: the controller answers each call at its deadline, and the client resets
// a call only when that answer is over a second late (DEADLINE_ANSWER_GRACE_MS). 200 calls at once
// from this same process could delay the answers by that much on a loaded machine.

const BURSTS = 48;
const BURST_SIZE = 50;
const DEADLINE_MS = 50;

function dynamicSpecJson(longLimit: number | null): string {
  return JSON.stringify({
    throttlers: {
      // Nothing is ever granted here: every burst call waits until its deadline.
      never: { limit: 0, max_queue_size: 100_000 },
      long: { limit: longLimit },
    },
  });
}

describe("bursts of short deadlines over gRPC", { timeout: 600_000 }, () => {
  let running: RunningController;

  before(async () => {
    const spec = validatePipelineSpec({
      pipeline: "deadline-burst",
      streams: { in: { topic: "in" } },
      computations: { C: { module: "./c.ts", inputs: ["in"] } },
      dynamic_spec: JSON.parse(dynamicSpecJson(0)),
    });
    assert.ok(spec.ok, spec.ok ? "" : JSON.stringify(spec.issues));
    running = await startController({ spec: spec.value, port: 0 });
  });

  after(async () => {
    await running.close();
  });

  /**
   * One long wait on the first client, then BURSTS × BURST_SIZE calls spread over `clients`; every
   * call's outcome is tallied by Sluice code. The long wait must outlive the bursts and be granted
   * once its throttler gets a limit.
   */
  async function burst(clients: QuotaServiceClient[], label: string) {
    const first = clients[0];
    assert.ok(first);
    let longOutcome = "pending";
    const longWait = first
      .requestQuota(
        { throttlerId: "long", clientId: `${label}-long`, amount: 1, timestampMs: 0, quotaClassId: "", requestId: `${label}-long` },
        // Far past any burst: the bursts' speed is the machine's, and what is tested is that this
        // wait survives them, not how fast they go.
        { deadlineAt: Date.now() + 600_000 },
      )
      .then(
        (result) => (longOutcome = `granted ${result.granted}`),
        (error: unknown) => (longOutcome = `failed: ${String(error)}`),
      );
    const outcomes = new Map<string, number>();
    const unexpected: string[] = [];
    const started = performance.now();
    let seq = 0;
    for (let round = 0; round < BURSTS; round++) {
      await Promise.all(
        Array.from({ length: BURST_SIZE }, (_, i) => {
          const client = clients[i % clients.length];
          assert.ok(client);
          const requestId = `${label}-${++seq}`;
          return client
            .requestQuota(
              { throttlerId: "never", clientId: `${label}/job-${i}`, amount: 1, timestampMs: 0, quotaClassId: "", requestId },
              { deadlineAt: Date.now() + DEADLINE_MS },
            )
            .then(
              () => "granted",
              (error: unknown) => {
                const code = isSluiceError(error) ? error.code : "not a SluiceError";
                if (code !== "QUOTA_TIMEOUT" && unexpected.length < 5) unexpected.push(String(error));
                return code;
              },
            )
            .then((code) => outcomes.set(code, (outcomes.get(code) ?? 0) + 1));
        }),
      );
    }
    const seconds = (performance.now() - started) / 1000;
    const total = BURSTS * BURST_SIZE;
    assert.deepEqual(Object.fromEntries(outcomes), { QUOTA_TIMEOUT: total }, `${label}: ${unexpected.join("\n")}`);

    // The unrelated wait on the same connection is still waiting, and is served once it can be.
    assert.equal(longOutcome, "pending", `${label}: the long wait did not survive the bursts (${total} calls in ${seconds.toFixed(1)} s)`);
    await first.updateDynamicSpec(dynamicSpecJson(null));
    await longWait;
    assert.equal(longOutcome, "granted 1");
    await first.updateDynamicSpec(dynamicSpecJson(0));
    return seconds;
  }

  it("on a single client: every call ends QUOTA_TIMEOUT, none INTERNAL, and a long wait on the connection survives", async () => {
    const client = createGrpcQuotaClient(running.address);
    try {
      await burst([client], "single");
    } finally {
      client.close();
    }
  });

  it("over eight clients: the same", async () => {
    // grpc-js pools connections by target and options, so these may share one HTTP/2 connection:
    // the case the issue reported, with calls interleaved from several channels.
    const clients = Array.from({ length: 8 }, () => createGrpcQuotaClient(running.address));
    try {
      await burst(clients, "eight");
    } finally {
      for (const client of clients) client.close();
    }
  });
});
