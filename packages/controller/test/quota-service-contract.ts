import assert from "node:assert/strict";
import { describe, it, type TestContext } from "node:test";
import { isSluiceError, systemClock } from "@sluice/core";
import type { QuotaServiceClient, RequestQuotaCall } from "@sluice/protocol";
import { validateDynamicSpec } from "@sluice/spec";
import { Controller, type ControllerSnapshot, type ControllerThrottlerSnapshot } from "../src/index.ts";

/**
 * The QuotaService contract (docs/design.md §9, §4), run once per transport: whatever carries the calls,
 * a client sees the same grants, order, errors and messages. Real clock, generous tolerances.
 */
export type MakeClient = (controller: Controller) => Promise<{ client: QuotaServiceClient; close(): Promise<void> }>;

const COMPUTATIONS = ["Enricher"];

interface Setup {
  readonly controller: Controller;
  readonly client: QuotaServiceClient;
  ask(overrides: Partial<RequestQuotaCall>, options?: { deadlineAt?: number; signal?: AbortSignal }): Promise<{ granted: number; waitedMs: number }>;
  describe(): Promise<ControllerSnapshot>;
  throttler(id: string): Promise<ControllerThrottlerSnapshot>;
}

let nextId = 0;

export function quotaServiceContract(name: string, makeClient: MakeClient): void {
  async function setup(t: TestContext, throttlers: Record<string, unknown>): Promise<Setup> {
    const parsed = validateDynamicSpec({ throttlers }, { computations: COMPUTATIONS });
    assert.ok(parsed.ok, parsed.ok ? "" : JSON.stringify(parsed.issues));
    const controller = new Controller({ dynamicSpec: parsed.value, computations: COMPUTATIONS, clock: systemClock });
    const { client, close } = await makeClient(controller);
    t.after(async () => {
      await close();
      controller.close();
    });
    const describeAll = async () => JSON.parse((await client.describeThrottlers()).snapshotJson) as ControllerSnapshot;
    return {
      controller,
      client,
      ask: (overrides, options) =>
        client.requestQuota(
          {
            throttlerId: "api",
            clientId: "worker-1/Enricher/0",
            amount: 1,
            timestampMs: 0,
            quotaClassId: "",
            requestId: `req-${++nextId}`,
            ...overrides,
          },
          options,
        ),
      describe: describeAll,
      throttler: async (id) => {
        const found = (await describeAll()).throttlers.find((throttler) => throttler.id === id);
        assert.ok(found, `throttler ${id} in the snapshot`);
        return found;
      },
    };
  }

  /** Polls `check` every 20 ms until it holds; fails after `ms` (long: it only bounds a hang). */
  async function eventually(check: () => Promise<boolean>, what: string, ms = 30_000): Promise<void> {
    const end = performance.now() + ms;
    while (!(await check())) {
      if (performance.now() > end) assert.fail(`timed out waiting for ${what}`);
      await systemClock.sleep(20);
    }
  }

  const since = (start: number) => performance.now() - start;

  describe(`QuotaService contract: ${name}`, { timeout: 60_000 }, () => {
    it("grants at once from a full bucket", async (t) => {
      const s = await setup(t, { api: { limit: 100, period: "1s" } });
      const start = performance.now();
      assert.deepEqual(await s.ask({ amount: 10 }), { granted: 10, waitedMs: 0 });
      // waitedMs 0 is the controller's own word; the wall-clock bound only catches a hang (a first
      // call over a cold connection took over 3 s at a load average of 30).
      assert.ok(since(start) < 30_000, `took ${since(start)} ms`);
    });

    it("makes the request after the burst wait about 1/limit s, then one every 1/limit s", async (t) => {
      const s = await setup(t, { api: { limit: 10, period: "500ms" } }); // capacity 5
      const start = performance.now();
      const answers = await Promise.all(Array.from({ length: 8 }, () => s.ask({ amount: 1 }).then(({ waitedMs }) => ({ waitedMs, atMs: since(start) }))));
      answers.sort((a, b) => a.atMs - b.atMs);
      const waited = answers.map((a) => a.waitedMs);
      const at = answers.map((a) => a.atMs);
      const figures = `waited ${waited.map((w) => w.toFixed(1)).join(", ")} ms; answered at ${at.map((a) => a.toFixed(0)).join(", ")} ms`;
      // Pay-after: 5 from the full bucket at once, a 6th as soon as the balance is above 0 (it found
      // nobody waiting at balance 0), then one per 100 ms. The controller's own wait figures say the
      // burst did not wait; a loaded machine may delay every answer, so wall-clock times are checked
      // only from below (nothing can come early) and against a generous ceiling. How long the 7th
      // itself waited depends on when it reached the controller, which a cold, loaded machine spreads.
      assert.deepEqual(waited.slice(0, 5), [0, 0, 0, 0, 0], `the burst is granted at once: ${figures}`);
      assert.ok((waited[5] ?? Infinity) < 90, `the 6th waits for a sliver of balance, not a slot: ${figures}`);
      assert.ok((at[6] ?? 0) >= 60 && (at[7] ?? 0) >= 160, `one per 100 ms after the burst: ${figures}`);
      assert.ok((at[7] ?? Infinity) < 3_000, `the 8th within 3 s: ${figures}`);
    });

    it("serves the oldest lag timestamp first when quota is scarce", async (t) => {
      // Closed (limit 0) until all three are queued by the controller's own count, then opened: how
      // far apart a loaded machine delivers the three calls cannot let one be served alone.
      const s = await setup(t, { api: { limit: 0 } });
      const order: number[] = [];
      const asked = Promise.all([300, 100, 200].map((timestampMs) => s.ask({ timestampMs }).then(() => order.push(timestampMs))));
      await eventually(async () => (await s.throttler("api")).pendingRequests === 3, "three queued requests");
      await s.client.updateDynamicSpec(JSON.stringify({ throttlers: { api: { limit: 10, period: "100ms" } } }));
      await asked;
      assert.deepEqual(order, [100, 200, 300]);
    });

    it("interleaves weighted classes chunk by chunk with max_grant_amount", async (t) => {
      const classes = { gold: { weight: 3 }, silver: { weight: 1 } };
      // Closed (limit 0) while silver, then gold, are queued (by the controller's own count), then
      // opened: a loaded machine cannot let silver be served alone before gold arrives.
      const s = await setup(t, { api: { limit: 0, max_grant_amount: 10, classes } });
      const finished: string[] = [];
      const ask = (quotaClassId: string) =>
        s.ask({ amount: 60, quotaClassId }).then((answer) => {
          finished.push(quotaClassId);
          return answer;
        });
      const silver = ask("silver");
      await eventually(async () => (await s.throttler("api")).pendingRequests === 1, "silver queued");
      const gold = ask("gold");
      await eventually(async () => (await s.throttler("api")).pendingRequests === 2, "gold queued");
      await s.client.updateDynamicSpec(JSON.stringify({ throttlers: { api: { limit: 100, period: "100ms", max_grant_amount: 10, classes } } }));
      assert.equal((await gold).granted, 60);
      const silverWhenGoldDone = (await s.throttler("api")).classes.find((c) => c.id === "silver")?.granted ?? NaN;
      assert.equal((await silver).granted, 60);
      // 3:1 → gold's 6 chunks come with about 2 of silver's. Chunking: silver had a chunk before gold
      // finished (read after gold's answer, so a slow read only adds to it). Weights: gold, queued
      // after silver, finished first (first come first served, or 1:1 turns, would finish silver first).
      assert.ok(silverWhenGoldDone >= 10, `silver had ${silverWhenGoldDone} when gold finished`);
      assert.deepEqual(finished, ["gold", "silver"]);
    });

    it("fails with QUOTA_TIMEOUT at the call's deadline; a retry with the same request_id resumes ahead of later requests", async (t) => {
      const s = await setup(t, { api: { limit: 5, period: "200ms" } }); // capacity 1
      // Balance −15: 3 s of debt, so that job-b and the retry both still wait when they arrive,
      // however slowly a loaded machine gets them there.
      const DEBT_MS = 3_000;
      await s.ask({ amount: 16 });
      const start = performance.now();
      await assert.rejects(s.ask({ requestId: "job-a" }, { deadlineAt: systemClock.now() + 150 }), (error: unknown) => {
        assert.ok(isSluiceError(error, "QUOTA_TIMEOUT"), String(error));
        assert.equal(error.retriable, true);
        return true;
      });
      // Not before the deadline, and before the quota could have come.
      assert.ok(since(start) >= 120 && since(start) < DEBT_MS, `timed out after ${since(start)} ms`);
      const order: string[] = [];
      const later = s.ask({ requestId: "job-b" }).then(() => order.push("job-b"));
      // job-b is queued (the controller's own count) before the retry is sent.
      await eventually(async () => (await s.throttler("api")).pendingRequests >= 1, "job-b in the queue");
      const retry = s.ask({ requestId: "job-a" }).then(() => order.push("job-a"));
      await Promise.all([later, retry]);
      assert.deepEqual(order, ["job-a", "job-b"], "the retry went back to its original place");
    });

    it("grants the same live request_id once", async (t) => {
      const s = await setup(t, { api: { limit: 10, period: "100ms" } });
      await s.ask({ amount: 5 }); // 400 ms of debt
      const [first, second] = await Promise.all([s.ask({ amount: 2, requestId: "dup" }), s.ask({ amount: 2, requestId: "dup" })]);
      assert.equal(first.granted, 2);
      assert.equal(second.granted, 2);
      const { counters } = await s.throttler("api");
      assert.equal(counters.granted, 7, "5 + 2: the duplicate joined the first request");
      assert.equal(counters.joined, 1);
    });

    it("refunds what a request was granted when its caller cancels", async (t) => {
      const s = await setup(t, { api: { limit: 10, period: "1s", max_grant_amount: 5 } }); // capacity 10
      await s.ask({ amount: 10 }); // balance 0
      const abort = new AbortController();
      const big = s.ask({ amount: 30, requestId: "big" }, { signal: abort.signal });
      await eventually(async () => (await s.throttler("api")).counters.granted >= 15, "the first chunk of the big request");
      abort.abort(new Error("job stopping"));
      await assert.rejects(big, (error: unknown) => isSluiceError(error, "CANCELLED") && /job stopping/.test(error.message));
      // Every chunk granted to the big request before the cancel reached the controller is refunded:
      // one chunk (5) on a quiet machine, more when the cancel travels slowly, never all 30.
      await eventually(async () => {
        const { counters } = await s.throttler("api");
        return counters.refunded > 0 && counters.refunded === counters.granted - 10;
      }, "the refund of the granted chunks");
      const api = await s.throttler("api");
      assert.equal(api.pendingRequests, 0);
      assert.ok(api.counters.refunded >= 5 && api.counters.refunded < 30 && api.counters.refunded % 5 === 0, `refunded ${api.counters.refunded}`);
    });

    it("refuses an unknown or empty throttler id with UNKNOWN_THROTTLER", async (t) => {
      const s = await setup(t, { api: { limit: 10 } });
      await assert.rejects(s.ask({ throttlerId: "nope" }), {
        message: 'UNKNOWN_THROTTLER: throttler "nope" is not declared on this controller (dynamic_spec version 1; declared throttlers: "api")',
      });
      await assert.rejects(s.ask({ throttlerId: "" }), {
        message: 'UNKNOWN_THROTTLER: the throttler id is empty; declared throttlers: "api"',
      });
      await assert.rejects(s.client.releaseQuota({ throttlerId: "nope", clientId: "c", amount: 1, quotaClassId: "" }), (error: unknown) =>
        isSluiceError(error, "UNKNOWN_THROTTLER"),
      );
    });

    it("ends the waiters of a throttler removed by reconfiguration with THROTTLER_REMOVED (final), and refuses it so afterwards", async (t) => {
      const s = await setup(t, { api: { limit: 10 }, old: { limit: 0 } });
      let endedAt = Number.NaN;
      const waiting = s.ask({ throttlerId: "old" }, { deadlineAt: systemClock.now() + 30_000 }).finally(() => (endedAt = performance.now()));
      const ended = assert.rejects(waiting, (error: unknown) => {
        assert.ok(isSluiceError(error, "THROTTLER_REMOVED"), String(error));
        assert.equal(error.retriable, false);
        assert.equal(
          error.message,
          'THROTTLER_REMOVED: throttler "old" was removed from dynamic_spec in version 2; not retried: declare it again with `sluice reconfigure` to use it',
        );
        return true;
      });
      await eventually(async () => (await s.throttler("old")).pendingRequests === 1, "a waiting request");
      const start = performance.now();
      assert.equal((await s.client.updateDynamicSpec(JSON.stringify({ throttlers: { api: { limit: 10 } } }))).version, 2);
      await ended;
      // Ended by the update, not by its 30 s deadline: under half of it, whatever load adds.
      assert.ok(endedAt - start < 15_000, `the waiter ended ${endedAt - start} ms after the update`);
      await assert.rejects(s.ask({ throttlerId: "old" }), (error: unknown) => {
        assert.ok(isSluiceError(error, "THROTTLER_REMOVED"), String(error));
        assert.deepEqual(error.details, { throttlerId: "old", removedInVersion: 2, version: 2 });
        return true;
      });
      // Declared again: served again. Never declared: still UNKNOWN_THROTTLER (retriable).
      await s.client.updateDynamicSpec(JSON.stringify({ throttlers: { api: { limit: 10 }, old: { limit: 10 } } }));
      assert.equal((await s.ask({ throttlerId: "old" })).granted, 1);
      await assert.rejects(s.ask({ throttlerId: "never" }), (error: unknown) => isSluiceError(error, "UNKNOWN_THROTTLER") && error.retriable);
    });

    it("refuses -1, NaN, Infinity and 1e300 with INVALID_AMOUNT, each with its figures", async (t) => {
      const s = await setup(t, { api: { limit: 10 } });
      const cases: [number, string][] = [
        [-1, 'INVALID_AMOUNT: amount must be a finite number >= 0, got -1 (throttler "api", request "bad")'],
        [NaN, 'INVALID_AMOUNT: amount must be a finite number >= 0, got NaN (throttler "api", request "bad")'],
        [Infinity, 'INVALID_AMOUNT: amount must be a finite number >= 0, got Infinity (throttler "api", request "bad")'],
        [
          1e300,
          'INVALID_AMOUNT: amount 1e+300 exceeds the largest single request 9007199254740991 (throttler "api", request "bad"); ' +
            "split it into smaller requests",
        ],
      ];
      for (const [amount, message] of cases) {
        await assert.rejects(s.ask({ amount, requestId: "bad" }), (error: unknown) => {
          assert.ok(isSluiceError(error, "INVALID_AMOUNT"), String(error));
          assert.equal(error.message, message);
          assert.equal(error.retriable, false);
          return true;
        });
      }
      assert.equal((await s.throttler("api")).counters.refusedInvalidAmount, 4);
    });

    it("puts an unknown class in default and counts it", async (t) => {
      const s = await setup(t, { api: { limit: 100, classes: { gold: { weight: 2 } } } });
      assert.equal((await s.ask({ amount: 3, quotaClassId: "platinum" })).granted, 3);
      const api = await s.throttler("api");
      assert.equal(api.counters.unknownClassRequests, 1);
      assert.equal(api.classes.find((c) => c.id === "default")?.granted, 3);
      assert.equal(api.classes.find((c) => c.id === "gold")?.granted, 0);
    });

    it("refuses request max_queue_size + 1 with QUEUE_FULL and its figures", async (t) => {
      const s = await setup(t, { tiny: { limit: 0, max_queue_size: 3 } });
      const abort = new AbortController();
      const waiting = [0, 1, 2].map((i) => s.ask({ throttlerId: "tiny", requestId: `q${i}` }, { signal: abort.signal }).catch((e: unknown) => e));
      await eventually(async () => (await s.throttler("tiny")).pendingRequests === 3, "three waiting requests");
      await assert.rejects(s.ask({ throttlerId: "tiny", requestId: "q3" }), (error: unknown) => {
        assert.ok(isSluiceError(error, "QUEUE_FULL"), String(error));
        assert.equal(error.message, 'QUEUE_FULL: throttler "tiny" has 3 requests waiting (max_queue_size 3); retry with backoff');
        assert.equal(error.retriable, true);
        return true;
      });
      abort.abort();
      for (const outcome of await Promise.all(waiting)) assert.ok(isSluiceError(outcome, "CANCELLED"), String(outcome));
    });

    it("returns released tokens to the bucket", async (t) => {
      const s = await setup(t, { api: { limit: 1, period: "10s" } }); // capacity 10
      await s.ask({ amount: 10 });
      await s.client.releaseQuota({ throttlerId: "api", clientId: "worker-1/Enricher/0", amount: 4, quotaClassId: "" });
      const api = await s.throttler("api");
      assert.ok(api.balance !== null && api.balance > 3.9 && api.balance < 4.6, `balance ${api.balance}`);
      assert.equal(api.counters.released, 4);
      await assert.rejects(s.client.releaseQuota({ throttlerId: "api", clientId: "c", amount: -4, quotaClassId: "" }), (error: unknown) =>
        isSluiceError(error, "INVALID_AMOUNT"),
      );
    });

    it("streams the current dynamic_spec version, then each update", async (t) => {
      const s = await setup(t, { api: { limit: 10 } });
      const updates: { version: number; limit: unknown }[] = [];
      const abort = new AbortController();
      const watching = s.client.watchDynamicSpec(
        "worker-1",
        (update) => {
          const spec = JSON.parse(update.dynamicSpecJson) as { throttlers: Record<string, { limit: unknown }> };
          updates.push({ version: update.version, limit: spec.throttlers["api"]?.limit });
        },
        abort.signal,
      );
      await eventually(async () => updates.length === 1, "the current version");
      assert.equal((await s.client.updateDynamicSpec('{"throttlers":{"api":{"limit":25}}}')).version, 2);
      await eventually(async () => updates.length === 2, "the update");
      assert.deepEqual(updates, [
        { version: 1, limit: 10 },
        { version: 2, limit: 25 },
      ]);
      abort.abort();
      await watching;
    });

    it("refuses an invalid dynamic_spec with SPEC_INVALID listing every issue, and changes nothing", async (t) => {
      const s = await setup(t, { api: { limit: 10 } });
      const bad = JSON.stringify({ throttlers: { api: { limit: -1, period: "soon" } }, computations: { Nope: {} } });
      await assert.rejects(s.client.updateDynamicSpec(bad), (error: unknown) => {
        assert.ok(isSluiceError(error, "SPEC_INVALID"), String(error));
        assert.match(error.message, /^SPEC_INVALID: dynamic_spec was refused \(3 issues; nothing changed, version 1 stays in force\): /);
        for (const path of ["dynamic_spec.computations.Nope", "dynamic_spec.throttlers.api.limit", "dynamic_spec.throttlers.api.period"]) {
          assert.ok(error.message.includes(`${path}: `), `lists ${path}`);
        }
        return true;
      });
      await assert.rejects(s.client.updateDynamicSpec('{"throttlers": {"api": }'), {
        message: /^SPEC_INVALID: dynamic_spec_json is not valid JSON at line 1, column 24 /,
      });
      const snapshot = await s.describe();
      assert.equal(snapshot.version, 1);
      assert.equal(snapshot.throttlers[0]?.limit, 10);
    });

    it("speeds up a waiter already queued when the limit is raised", async (t) => {
      const s = await setup(t, { api: { limit: 1, period: "1s" } });
      await s.ask({ amount: 11 }); // balance −10: 10 s at 1/s
      const start = performance.now();
      const waiter = s.ask({ amount: 1 });
      // Queued (the controller's own count) before the limit is raised.
      await eventually(async () => (await s.throttler("api")).pendingRequests === 1, "the waiter in the queue");
      assert.equal((await s.client.updateDynamicSpec('{"throttlers":{"api":{"limit":100,"period":"1s"}}}')).version, 2);
      await waiter;
      // At 100/s the debt is gone in 0.1 s; at the old limit the waiter would wait 10 s. Half of
      // that tells them apart however much a loaded machine slows the calls.
      assert.ok(since(start) < 5_000, `granted after ${since(start)} ms instead of about 10,000`);
    });

    it("fails waiters with CONTROLLER_UNAVAILABLE when the controller closes", async (t) => {
      const s = await setup(t, { api: { limit: 0 } });
      const waiting = s.ask({ amount: 1 });
      await eventually(async () => (await s.throttler("api")).pendingRequests === 1, "a waiting request");
      s.controller.close();
      const expected = "CONTROLLER_UNAVAILABLE: the controller is shutting down; retry against the restarted controller";
      await assert.rejects(waiting, (error: unknown) => isSluiceError(error, "CONTROLLER_UNAVAILABLE") && error.message === expected);
      await assert.rejects(s.ask({ amount: 1 }), { message: expected });
    });

    it("carries ReportWatermarks: each partition's bound, the group's figures, the instance and settling (docs/design.md §12)", async (t) => {
      const s = await setup(t, {});
      const t0 = 1_700_000_000_000;
      const report = s.client.reportWatermarks;
      assert.ok(report, "the transport implements ReportWatermarks");
      const answer = await report.call(s.client, {
        clientId: "worker-1",
        partitions: [
          { groupName: "g", partitionId: "Enricher/in/0", watermarkMs: t0, idle: false, held: false },
          { groupName: "g", partitionId: "Enricher/in/1", watermarkMs: t0 + 3_600_000, idle: false, held: true },
          { groupName: "g", partitionId: "Enricher/in/2", watermarkMs: 0, idle: true, held: false },
        ],
      });
      assert.deepEqual(answer.bounds, [
        { partitionId: "Enricher/in/0", othersWatermarkMs: t0 + 3_600_000, unbounded: false },
        { partitionId: "Enricher/in/1", othersWatermarkMs: t0, unbounded: false },
        { partitionId: "Enricher/in/2", othersWatermarkMs: t0, unbounded: false },
      ]);
      assert.deepEqual(answer.groups, [{ groupName: "g", watermarkMs: t0, partitions: 3, held: 1, idle: 1 }]);
      assert.match(answer.controllerInstance, /^[0-9a-f-]{36}$/);
      assert.equal(answer.settling, true);
      const alone = await report.call(s.client, {
        clientId: "worker-2",
        partitions: [{ groupName: "h", partitionId: "Enricher/in/9", watermarkMs: t0, idle: false, held: false }],
      });
      assert.deepEqual(alone.bounds, [{ partitionId: "Enricher/in/9", othersWatermarkMs: 0, unbounded: true }]);
      assert.deepEqual(
        (await s.describe()).alignment?.map((g) => g.group),
        ["g", "h"],
      );
      await assert.rejects(
        report.call(s.client, { clientId: "", partitions: [] }),
        (error: unknown) => isSluiceError(error, "INVALID_REQUEST") && /ReportWatermarks: client_id is empty/.test(error.message),
      );
    });
  });
}
