// Concurrency liveness across repeated failovers (docs/design.md §11.2, §5.3), in virtual time with the
// in-memory stand-ins and the state record's own encoding: a holder that never renews (its grant's
// answer was lost and its caller gave up) loses its units after lease_timeout of time in which some
// leader served, however many takeovers come in between. A successor used to give every restored
// lease a full lease_timeout, so leaderships shorter than lease_timeout kept such units held for
// good and the throttler granted nothing more. A holder that does renew keeps its units throughout.
import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { ManualClock } from "@sluice/core";
import type { CallContext } from "@sluice/protocol";
import { dynamicSpecSchema } from "@sluice/spec";
import { MemoryStore, startStandInMember } from "./failover-stand-ins.ts";

const LEASE_MS = 3_000;
const SPEC = dynamicSpecSchema.parse({ throttlers: { tasks: { kind: "concurrency", limit: 4, lease_timeout: `${LEASE_MS}ms` } } });

const context = (): CallContext => ({ deadlineAt: null, signal: new AbortController().signal, metadata: {} });
/** Records go through JSON as they would through the topic. */
const jsonCodec = <T>(record: T): T => JSON.parse(JSON.stringify(record)) as T;

async function member(store: MemoryStore, clock: ManualClock, index: number) {
  const started = await startStandInMember({ store, clock, address: `127.0.0.1:${7100 + index}`, dynamicSpec: SPEC });
  const ask = (clientId: string, amount: number, requestId: string) =>
    started.controller.requestQuota({ throttlerId: "tasks", clientId, amount, timestampMs: 0, quotaClassId: "", requestId }, context());
  const renew = (clientId: string) => started.controller.renewLeases({ clientId, throttlerIds: ["tasks"] }, context());
  return { ...started, ask, renew, tasks: () => started.throttler("tasks") };
}

type Member = Awaited<ReturnType<typeof member>>;

/** Leaderships of `servingMs` each, one after another; `during` runs every 250 ms of each. */
async function leaderships(
  first: Member,
  store: MemoryStore,
  clock: ManualClock,
  count: number,
  servingMs: number,
  during: (m: Member) => Promise<void>,
): Promise<Member> {
  let current = first;
  for (let i = 0; i < count; i++) {
    // The old leader dies without a word (it writes nothing more); nobody leads for a while.
    await current.controller.close();
    await clock.advance(5_000);
    current = await member(store, clock, i + 1);
    await current.lead(i + 2);
    for (let t = 0; t < servingMs; t += 250) {
      await clock.advance(250);
      await during(current);
    }
  }
  return current;
}

describe("concurrency liveness across repeated failovers (virtual time)", () => {
  it("units of a holder that never renews come back after lease_timeout of serving time, though every leadership is shorter", async () => {
    const clock = new ManualClock(1_700_000_000_000);
    const store = new MemoryStore(jsonCodec);
    const first = await member(store, clock, 0);
    await first.lead(1);
    // Three holders whose callers gave up before the answer came: they never renew.
    await first.ask("gone-a", 2, "a-1");
    await first.ask("gone-b", 1, "b-1");
    await first.ask("gone-c", 1, "c-1");
    await clock.advance(1_000);
    // Five leaderships of 1 s each: 1 s + 5 s of serving time without a word from them, past lease_timeout (3 s).
    const last = await leaderships(first, store, clock, 5, 1_000, async () => {});
    assert.equal(last.tasks().inUse, 0, `the silent holders' units came back; log:\n${last.lines.join("\n")}`);
    assert.equal((await last.ask("new", 4, "n-1")).granted, 4, "and are granted to a new holder");
    await last.controller.close();
  });

  it("a holder that renews with each leader keeps its units across the same takeovers", async () => {
    const clock = new ManualClock(1_700_000_000_000);
    const store = new MemoryStore(jsonCodec);
    const first = await member(store, clock, 0);
    await first.lead(1);
    await first.ask("live", 3, "l-1");
    await first.ask("gone", 1, "g-1");
    let sinceRenewal = 0;
    const last = await leaderships(first, store, clock, 6, 1_000, async (m) => {
      // A client renews every lease_timeout / 3 of its own time; renewals to nobody are lost.
      sinceRenewal += 250;
      if (sinceRenewal >= LEASE_MS / 3) {
        sinceRenewal = 0;
        const held = (await m.renew("live")).held;
        assert.equal(held, 3, `${JSON.stringify(store.throttler("tasks"))}\n${m.lines.join("\n")}`);
      }
    });
    assert.equal(last.tasks().inUse, 3, "live keeps its 3 units; gone's 1 came back");
    assert.equal(last.tasks().concurrency?.holders, 1);
    await last.controller.close();
  });
});
