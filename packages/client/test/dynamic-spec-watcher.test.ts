import assert from "node:assert/strict";
import { it } from "node:test";
import { ManualClock } from "@sluice/core";
import type { DynamicSpecUpdate } from "@sluice/protocol";
import { DynamicSpecWatcher } from "../src/index.ts";
import { FakeQuotaClient } from "@sluice/protocol/testing";

it("applies a restarted controller's version 1 when its content differs, and ignores a repeat", async () => {
  const client = new FakeQuotaClient();
  const updates: DynamicSpecUpdate[] = [
    { version: 1, dynamicSpecJson: JSON.stringify({ throttlers: { api: { limit: 10 } } }) },
    { version: 1, dynamicSpecJson: JSON.stringify({ throttlers: { api: { limit: 10 } } }) },
    { version: 1, dynamicSpecJson: JSON.stringify({ throttlers: { api: { limit: 99 } } }) },
  ];
  client.watchDynamicSpec = async (_id, onUpdate, signal) => {
    for (const update of updates) onUpdate(update);
    await new Promise<void>((resolve) => signal.addEventListener("abort", () => resolve(), { once: true }));
  };
  const limits: (number | null)[] = [];
  const watcher = new DynamicSpecWatcher({
    client: () => client,
    clientId: "w",
    clock: new ManualClock(),
    onSpec: (spec) => limits.push(spec.throttlers["api"]?.limit ?? null),
  });
  await watcher.start();
  await watcher.close();
  assert.deepEqual(limits, [10, 99]);
});
