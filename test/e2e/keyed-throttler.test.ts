// services: processes
// Keyed throttlers end to end (docs/design.md §11.4): @sluice/client's forKey in this process against a
// real `sluice controller` child over gRPC on 127.0.0.1. Two keys of one throttler driven at once
// are each held to their own limit (an override's and the template's); an override changed live
// reaches its key; max_keys refuses a new key with TOO_MANY_KEYS; forKey on a throttler that is
// not keyed fails naming it. Rates are bounded from above by the bucket (exact: capacity + limit × T)
// and from below loosely, because this machine is shared and may deliver less, never more.
import assert from "node:assert/strict";
import { after, describe, it } from "node:test";
import { connectThrottlers, type Throttlers } from "@sluice/client";
import { isSluiceError } from "@sluice/core";
import { createGrpcQuotaClient } from "@sluice/protocol";
import { type Child, NOOP_COMPUTATION, startController, writeSpec } from "../support/processes.ts";

const children: Child[] = [];
const open: Throttlers[] = [];
after(async () => {
  await Promise.all(open.map((t) => t.close()));
  for (const child of children) child.kill("SIGKILL");
});

const throttlersOf = (acmeLimit: number) => ({
  per_customer: { limit: 20, period: "1s", request_period: "200ms", keyed: { overrides: { acme: { limit: acmeLimit } } } },
  few: { limit: 100, keyed: { max_keys: 2 } },
  plain: { limit: 100 },
});

function specFile(): string {
  return writeSpec({
    pipeline: "keyed-e2e",
    streams: { input: { topic: "input" } },
    computations: { Reader: { module: NOOP_COMPUTATION, inputs: ["input"] } },
    dynamic_spec: { throttlers: throttlersOf(100), computations: {} },
  });
}

async function until(condition: () => boolean, timeoutMs: number, what: string): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!condition()) {
    if (Date.now() > deadline) throw new Error(`${what}: not within ${timeoutMs} ms`);
    await new Promise((resolve) => setTimeout(resolve, 20));
  }
}

/** Units granted to `key` while driven by `callers` concurrent loops for `ms`. */
async function drive(throttlers: Throttlers, key: string, ms: number, callers = 4): Promise<{ units: number; seconds: number }> {
  const handle = throttlers.getThrottlerOrThrow("per_customer").forKey(key);
  const startedAt = Date.now();
  let units = 0;
  await Promise.all(
    Array.from({ length: callers }, async () => {
      while (Date.now() - startedAt < ms) {
        await handle.throttle(1);
        units += 1;
      }
    }),
  );
  return { units, seconds: (Date.now() - startedAt) / 1000 };
}

describe("keyed throttler over gRPC", () => {
  it("holds two keys driven at once to their own limits, follows an override changed live, refuses a key past max_keys", async () => {
    const { child, address } = await startController(specFile());
    children.push(child);
    const throttlers = await connectThrottlers({ controller: address, clientId: "enricher-1", log: null });
    open.push(throttlers);

    const [acme, small] = await Promise.all([drive(throttlers, "acme", 4_000), drive(throttlers, "small", 4_000)]);
    // Each key's bucket starts full (limit × 1 s) and refills at its own limit; a grant is made while
    // the balance is ≥ 0 and paid after, so one refill (at most the prefetch window, limit × 2 s
    // with request_period 200ms) can come on top.
    const bound = (limit: number, seconds: number) => limit + limit * seconds + limit * 2;
    assert.ok(acme.units <= bound(100, acme.seconds), `acme: ${acme.units} units in ${acme.seconds.toFixed(2)} s exceeds 100 + 100/s + one window`);
    assert.ok(small.units <= bound(20, small.seconds), `small: ${small.units} units in ${small.seconds.toFixed(2)} s exceeds 20 + 20/s + one window`);
    assert.ok(acme.units >= 0.6 * 100 * acme.seconds, `acme: ${acme.units} units in ${acme.seconds.toFixed(2)} s is far below 100/s`);
    assert.ok(small.units >= 0.6 * 20 * small.seconds, `small: ${small.units} units in ${small.seconds.toFixed(2)} s is far below 20/s`);
    assert.ok(acme.units > 3 * small.units, `acme (${acme.units}) runs at its override, well above small (${small.units})`);

    // The controller's own view: both keys live, acme and small among the keys.
    const admin = createGrpcQuotaClient(address);
    try {
      const describe = async () => JSON.parse((await admin.describeThrottlers()).snapshotJson) as { throttlers: { id: string; keyed?: { keys: number } }[] };
      const keyed = (await describe()).throttlers.find((t) => t.id === "per_customer")?.keyed;
      assert.equal(keyed?.keys, 2);

      // An override changed by a reconfiguration (what `sluice reconfigure` sends) reaches its key.
      const { version } = await admin.updateDynamicSpec(JSON.stringify({ throttlers: throttlersOf(5), computations: {} }));
      await until(() => throttlers.dynamicSpecVersion === version, 10_000, `dynamic_spec version ${version} reaching the client`);
      await new Promise((resolve) => setTimeout(resolve, 1_500)); // the old burst and prefetch run out
      const slowed = await drive(throttlers, "acme", 3_000);
      // Capacity is now 5 (5 × 1 s); anything the client prefetched at the old limit is at most one window more.
      assert.ok(slowed.units <= 5 + 5 * slowed.seconds + 25, `acme after the change: ${slowed.units} units in ${slowed.seconds.toFixed(2)} s, not about 5/s`);
    } finally {
      admin.close();
    }

    const few = throttlers.getThrottlerOrThrow("few");
    await few.forKey("a").throttle(1);
    await few.forKey("b").throttle(1);
    await assert.rejects(few.forKey("c").throttle(1), (error: unknown) => {
      assert.ok(isSluiceError(error, "TOO_MANY_KEYS"), String(error));
      assert.equal(error.retriable, false);
      assert.match(error.message, /keyed throttler "few" already holds 2 keys, its max_keys of 2/);
      return true;
    });
    await few.forKey("a").throttle(1); // a live key is never dropped for a new one

    assert.throws(
      () => throttlers.getThrottlerOrThrow("plain").forKey("acme"),
      (error: unknown) => {
        assert.ok(isSluiceError(error, "INVALID_REQUEST"), String(error));
        assert.match(error.message, /throttler "plain" is not keyed/);
        return true;
      },
    );
    assert.throws(() => throttlers.getThrottlerOrThrow("per_customer").forKey(""), /the key is empty/);
    await throttlers.close();
  });
});
