// services: processes, kafka
// A keyed throttler's key in debt through a leader SIGKILL (docs/design.md §5.4, §11.4) on the real
// broker (KAFKA_BROKERS): two `sluice controller` processes of one failover group, @sluice/client in
// this process. One big throttle(n) on the key "debtor" puts its bucket n − capacity units in debt
// (a grant is made while the balance is ≥ 0 and paid after); the leader is SIGKILLed by its pid;
// a fresh client (nothing prefetched) then asks the successor for one unit of "debtor", which must
// wait until the debt is paid at the key's limit — about (grant time + debt / limit) − now — while
// a new key of the same throttler is granted at once. A successor that started the key full (or
// forgot it) would grant it at once too.
//
//   KAFKA_BROKERS=127.0.0.1:19092 pnpm test:e2e test/e2e/keyed-failover.test.ts      (about 45 s)
import assert from "node:assert/strict";
import { after, test } from "node:test";
import { connectThrottlers, type Throttlers } from "@sluice/client";
import type { ControllerSnapshot } from "@sluice/controller";
import { freePorts, servingLeader, startControllers } from "../support/failover-group.ts";
import { brokers, uniqueName } from "../support/kafka.ts";
import { type Child, writeSpec } from "../support/processes.ts";

/** Units per second of every key; capacity LIMIT (period 1 s). */
const LIMIT = 5;
/**
 * The big request: LIMIT full units, then DEBT owed, paid off DEBT / LIMIT = 30 s after the grant:
 * long enough for the kill, the failover (at most MAX_FAILOVER_MS), a new client and a fresh grant
 * on a loaded machine, with the successor's wait still long against its tolerances.
 */
const AMOUNT = 155;
const DEBT = AMOUNT - LIMIT;
/**
 * Past this the successor came too late to show the debt (it is paid 30 s after the grant). A
 * failover with session_timeout 6 s takes about 6 s, and test/e2e/controller-failover.test.ts holds
 * it to 10 s under load: twice that bound.
 */
const MAX_FAILOVER_MS = 20_000;
/** A new key's first grant is committed to Kafka before the answer: "at once" allows that write. */
const FRESH_MS = 5_000;
/**
 * Tolerances of the wait on the successor around its expected value: the restore is exact (the
 * record holds the balance and the time it was read), so early means a lost debt; late allows one
 * refill round trip and a loaded machine's event loops.
 */
const EARLY_MS = 1_000;
const LATE_MS = 3_000;

const children: Child[] = [];
const clients: Throttlers[] = [];
after(async () => {
  await Promise.allSettled(clients.map((c) => c.close()));
  for (const child of children) child.kill("SIGKILL");
});

test("a key in debt is still in debt on the successor after a leader SIGKILL; a new key is granted at once", { timeout: 300_000 }, async (t) => {
  const pipeline = uniqueName("keyed-failover");
  const addresses = (await freePorts(2)).map((port) => `127.0.0.1:${port}`);
  const spec = writeSpec({
    pipeline,
    kafka: { brokers: await brokers(), session_timeout: "6s" },
    controller: { addresses },
    streams: {},
    computations: {},
    dynamic_spec: { throttlers: { per_customer: { limit: LIMIT, period: "1s", request_period: "200ms", keyed: {} } } },
  });
  const controllers = await startControllers(spec, addresses, children);
  const first = await servingLeader<ControllerSnapshot>({ addresses }, null, 60_000);

  const connect = async (clientId: string) => {
    const throttlers = await connectThrottlers({ controller: addresses, clientId, log: null, connectTimeoutMs: 60_000 });
    clients.push(throttlers);
    return throttlers.getThrottlerOrThrow("per_customer");
  };
  const before = await connect("enricher-1");
  const askedAt = Date.now();
  await before.forKey("debtor").throttle(AMOUNT);
  // Granted (and persisted: the leader answers once the key's record is committed) between these two.
  const grantedBy = Date.now();
  assert.ok(grantedBy - askedAt < 5_000, `the big request was granted at once from a full bucket (${grantedBy - askedAt} ms)`);

  const leader = controllers.get(first.address);
  assert.ok(leader?.process.pid, "the leader runs");
  process.kill(leader.process.pid, "SIGKILL");
  const killedAt = Date.now();
  const successor = await servingLeader<ControllerSnapshot>({ addresses }, first.address, MAX_FAILOVER_MS);
  const failoverMs = Date.now() - killedAt;
  t.diagnostic(`successor ${successor.address} served ${failoverMs} ms after the SIGKILL; debt of ${DEBT} granted ${killedAt - grantedBy} ms before it`);
  const keyed = successor.snapshot.throttlers.find((x) => x.id === "per_customer")?.keyed;
  assert.equal(keyed?.keys, 1, "the successor remembers the key in debt");

  // A fresh client: nothing prefetched, so its first unit of "debtor" is the successor's answer.
  const after = await connect("enricher-2");
  const freshAskedAt = Date.now();
  await after.forKey("fresh").throttle(1);
  const freshMs = Date.now() - freshAskedAt;

  const debtorAskedAt = Date.now();
  // The balance reaches 0 DEBT / LIMIT after the grant: somewhere between askedAt and grantedBy.
  const expectedAt = { earliest: askedAt + (DEBT / LIMIT) * 1000, latest: grantedBy + (DEBT / LIMIT) * 1000 };
  assert.ok(expectedAt.earliest - debtorAskedAt > 2_000, `the successor served too late to show the debt (${failoverMs} ms after the SIGKILL)`);
  await after.forKey("debtor").throttle(1);
  const answeredAt = Date.now();
  const waitedMs = answeredAt - debtorAskedAt;
  t.diagnostic(
    `on the successor: "fresh" granted in ${freshMs} ms; "debtor" waited ${waitedMs} ms, ` +
      `expected ${expectedAt.earliest - debtorAskedAt}–${expectedAt.latest - debtorAskedAt} ms (debt ${DEBT} at ${LIMIT}/s)`,
  );
  assert.ok(freshMs < FRESH_MS, `a new key is granted at once on the successor (${freshMs} ms)`);
  assert.ok(
    answeredAt >= expectedAt.earliest - EARLY_MS,
    `"debtor" was granted ${expectedAt.earliest - answeredAt} ms before its debt was paid: the debt was lost`,
  );
  assert.ok(answeredAt <= expectedAt.latest + LATE_MS, `"debtor" was granted ${answeredAt - expectedAt.latest} ms after its debt was paid`);
});
