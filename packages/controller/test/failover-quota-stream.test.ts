// A failover leader's grant over QuotaStream (real gRPC on 127.0.0.1, the in-memory failover
// stand-ins in virtual time): the stream server answers at once only through a handler's
// requestQuotaNow, which the failover controller must not have — its grant may be answered only once
// the state write that counts it is durable (docs/design.md §5.2).
import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { ManualClock } from "@sluice/core";
import { createStreamQuotaClient, serveQuotaService, type QuotaServiceHandler } from "@sluice/protocol";
import { dynamicSpecSchema } from "@sluice/spec";
import { MemoryStore, startStandInMember } from "./failover-stand-ins.ts";

const SPEC = dynamicSpecSchema.parse({ throttlers: { rows: { limit: 10, period: "10s" } } });
const tick = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

describe("FailoverController over QuotaStream", () => {
  it("answers a grant only after the state write that counts it is durable", async () => {
    const store = new MemoryStore();
    const member = await startStandInMember({ store, clock: new ManualClock(1_000_000), address: "127.0.0.1:7001", dynamicSpec: SPEC });
    await member.lead(1);
    const handler: QuotaServiceHandler = member.controller;
    assert.equal(handler.requestQuotaNow, undefined, "the failover controller offers no answered-at-once path");
    const server = await serveQuotaService(member.controller, { port: 0 });
    const client = createStreamQuotaClient(server.address);
    try {
      let release!: () => void;
      store.hold = new Promise<void>((resolve) => (release = resolve));
      const writesBefore = store.writes.length;
      let answered = false;
      const grant = client
        .requestQuota({ throttlerId: "rows", clientId: "c", amount: 30, timestampMs: 0, quotaClassId: "", requestId: "g1" })
        .then((result) => {
          answered = true;
          return result;
        });
      // The grant is made (the leader's balance counts it) while its state write is held...
      const deadline = performance.now() + 30_000;
      while (member.throttler("rows").balance !== 70) {
        assert.ok(performance.now() < deadline, "the leader granted within 30 s");
        await tick(5);
      }
      // ...and stays unanswered for as long as the write is: 200 ms is many turns of both ends'
      // event loops (an answer in the grant's own turn would arrive within a few ms on loopback).
      await tick(200);
      assert.equal(answered, false, "not answered while the state write is pending");
      assert.equal(store.writes.length, writesBefore, "the write is still held");
      store.hold = null;
      release();
      assert.equal((await grant).granted, 30);
      const last = store.throttlerWrites("rows").at(-1);
      assert.equal(last?.balance?.balance, 70, "the persisted balance already counts the grant");
    } finally {
      client.close();
      await server.close({ graceMs: 100 });
      await member.controller.close();
    }
  });
});
