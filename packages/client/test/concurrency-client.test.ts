import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { ManualClock, SluiceError } from "@sluice/core";
import { createInMemoryQuotaClient, type QuotaServiceHandler, type RenewLeasesCall, type ReleaseQuotaCall, type RequestQuotaCall } from "@sluice/protocol";
import { validateDynamicSpec, type DynamicSpec } from "@sluice/spec";
import { DistributedThrottlerFactory } from "../src/index.ts";

// A job's client of a concurrency throttler against a recording handler (in-memory transport, so
// the calls cross the same copy-and-deadline path as over gRPC): no prefetch, one RequestQuota per
// throttle() for exactly its units, renewals while it holds units, and everything back on close.

function dynamicSpec(input: unknown): DynamicSpec {
  const result = validateDynamicSpec(input);
  if (!result.ok) throw new Error(JSON.stringify(result.issues));
  return result.value;
}

class RecordingHandler implements QuotaServiceHandler {
  readonly requests: RequestQuotaCall[] = [];
  readonly releases: ReleaseQuotaCall[] = [];
  readonly renewals: { call: RenewLeasesCall; at: number }[] = [];
  /** What renewals answer the controller counts as held; null: what was granted and not released, as a controller would. */
  held: number | null = null;
  private counted = 0;
  /** While set, RequestQuota waits for it (a request in flight). */
  hold: Promise<void> | null = null;
  constructor(private readonly clock: ManualClock) {}
  async requestQuota(call: RequestQuotaCall) {
    this.requests.push(call);
    if (this.hold) await this.hold;
    this.counted += call.amount;
    return { granted: call.amount, waitedMs: 0 };
  }
  /** While set, ReleaseQuota fails as with a controller that is away (nothing is applied). */
  away = false;
  async releaseQuota(call: ReleaseQuotaCall) {
    if (this.away) throw new SluiceError("CONTROLLER_UNAVAILABLE", "the controller is away (scripted)");
    this.releases.push(call);
    this.counted = Math.max(0, this.counted - call.amount);
  }
  async renewLeases(call: RenewLeasesCall) {
    this.renewals.push({ call, at: this.clock.now() });
    return { held: this.held ?? this.counted };
  }
  watchDynamicSpec() {}
  async updateDynamicSpec() {
    return { version: 1 };
  }
  async describeThrottlers() {
    return { snapshotJson: "{}" };
  }
}

/** A ManualClock whose reading can jump without firing timers: what a stopped process sees when it resumes. */
class StallableClock extends ManualClock {
  stalledMs = 0;
  override now(): number {
    return super.now() + this.stalledMs;
  }
}

function setup() {
  const clock = new StallableClock(1_000_000);
  const handler = new RecordingHandler(clock);
  const client = createInMemoryQuotaClient(handler, { clock });
  const factory = new DistributedThrottlerFactory({ computation: "Admitter", clientId: "w1/Admitter/0", client: () => client, clock });
  factory.reconfigure(dynamicSpec({ throttlers: { tasks: { kind: "concurrency", limit: 10, lease_timeout: "3s" } } }));
  return { clock, handler, factory, tasks: factory.getThrottlerOrThrow("tasks") };
}

describe("concurrency throttler client", () => {
  it("asks for exactly the units of each throttle(), holds no spare units, and releases at most what it holds", async () => {
    const { handler, factory, tasks } = setup();
    assert.equal(factory.isConcurrency("tasks"), true);
    await tasks.throttle(2);
    await tasks.throttle(1);
    assert.deepEqual(
      handler.requests.map((r) => r.amount),
      [2, 1],
    );
    assert.equal(tasks.tryAcquire(1), false, "no local pool to take from");
    tasks.release(5);
    await new Promise((done) => setImmediate(done));
    assert.deepEqual(
      handler.releases.map((r) => r.amount),
      [3],
      "only the 3 units it held",
    );
    factory.close();
  });

  it("renews its lease every lease_timeout / 3 while it holds units, and stops once it holds none", async () => {
    const { clock, handler, factory, tasks } = setup();
    await tasks.throttle(1);
    await clock.advance(3_000);
    assert.deepEqual(
      handler.renewals.map((r) => r.at - 1_000_000),
      [1_000, 2_000, 3_000],
    );
    assert.deepEqual(handler.renewals[0]?.call, { clientId: "w1/Admitter/0", throttlerIds: ["tasks"] });
    tasks.release(1);
    await clock.advance(5_000);
    assert.equal(handler.renewals.length, 3);
    factory.close();
  });

  it("gives every held unit back when the job closes, and keeps its client across a reconfiguration of the same kind", async () => {
    const { handler, factory, tasks } = setup();
    await tasks.throttle(4);
    factory.reconfigure(dynamicSpec({ throttlers: { tasks: { kind: "concurrency", limit: 20, lease_timeout: "5s" } } }));
    assert.equal(handler.releases.length, 0, "a reconfiguration does not hand back units in flight");
    tasks.release(1);
    factory.close();
    await new Promise((done) => setImmediate(done));
    assert.deepEqual(
      handler.releases.map((r) => r.amount),
      [1, 3],
    );
  });

  it("gives back units the controller counts for it beyond what it holds and its calls in flight can explain", async () => {
    const { clock, handler, factory, tasks } = setup();
    await tasks.throttle(2);
    // The controller counts 3 for this client, which holds 2 and has a request for 1 in flight.
    handler.held = 3;
    let release!: () => void;
    handler.hold = new Promise<void>((resolve) => (release = resolve));
    const inFlight = tasks.throttle(1);
    await clock.advance(1_000);
    assert.equal(handler.renewals.length, 1);
    assert.equal(handler.releases.length, 0, "a request in flight may be what the controller counts: nothing is given back");
    // A grant persisted by a leader that died before answering, or a release that was lost: 5
    // counted is 2 more than what it holds and asks for can explain.
    handler.held = 5;
    await clock.advance(1_000);
    await new Promise((done) => setImmediate(done));
    assert.deepEqual(
      handler.releases.map((r) => r.amount),
      [2],
      "5 counted, 2 held + 1 in flight: 2 go back",
    );
    handler.releases.length = 0;
    handler.hold = null;
    release();
    await inFlight;
    handler.held = 6;
    await clock.advance(1_000);
    await new Promise((done) => setImmediate(done));
    assert.deepEqual(
      handler.releases.map((r) => r.amount),
      [3],
      "6 counted, 3 held: 3 go back",
    );
    handler.held = 3;
    await clock.advance(1_000);
    await new Promise((done) => setImmediate(done));
    assert.equal(handler.releases.length, 1, "counting what it holds gives nothing back");
    factory.close();
  });

  it("renews with nothing held until it has given back a release the controller missed", async () => {
    const { clock, handler, factory, tasks } = setup();
    await tasks.throttle(1);
    handler.away = true;
    tasks.release(1);
    await new Promise((done) => setImmediate(done));
    handler.away = false;
    assert.equal(handler.releases.length, 0, "the release was lost: the controller still counts 1");
    await clock.advance(1_000);
    await new Promise((done) => setImmediate(done));
    assert.deepEqual(
      handler.releases.map((r) => r.amount),
      [1],
      "the next renewal found the unit and gave it back",
    );
    await clock.advance(1_000);
    const renewals = handler.renewals.length;
    await clock.advance(5_000);
    assert.equal(handler.renewals.length, renewals, "once the counts agree with nothing held, renewals stop");
    factory.close();
  });

  it("gives a lost release back again while its other callers keep requests in flight", async () => {
    const { clock, handler, factory, tasks } = setup();
    await tasks.throttle(1);
    handler.away = true;
    tasks.release(1);
    await new Promise((done) => setImmediate(done));
    handler.away = false;
    // Another caller waits at the controller the whole time: no renewal is ever quiet.
    handler.hold = new Promise<void>(() => {});
    void tasks.throttle(1).catch(() => {});
    await clock.advance(1_000);
    await new Promise((done) => setImmediate(done));
    assert.deepEqual(
      handler.releases.map((r) => r.amount),
      [1],
      "1 counted and 1 owed: the unit goes back although 1 is asked for in flight",
    );
    factory.close();
  });

  it("gives back a unit granted after its caller gave up, while others wait", async () => {
    const { clock, handler, factory, tasks } = setup();
    await tasks.throttle(1);
    let grant!: () => void;
    handler.hold = new Promise<void>((resolve) => (grant = resolve));
    const abort = new AbortController();
    const abandoned = tasks.throttle(1, { signal: abort.signal });
    const waiting = tasks.throttle(1);
    abort.abort(new Error("the caller's deadline"));
    await assert.rejects(abandoned, (error: unknown) => error instanceof SluiceError && error.code === "CANCELLED");
    // The controller grants the abandoned request anyway (its answer finds nobody); the other stays queued.
    handler.held = 2;
    await clock.advance(1_000);
    await new Promise((done) => setImmediate(done));
    assert.deepEqual(
      handler.releases.map((r) => r.amount),
      [],
      "2 counted, 1 held + 1 asked for in flight: it may be the waiting caller's",
    );
    handler.held = 3;
    await clock.advance(1_000);
    await new Promise((done) => setImmediate(done));
    assert.deepEqual(
      handler.releases.map((r) => r.amount),
      [1],
      "3 counted, 1 held + 1 in flight: 1 goes back",
    );
    handler.hold = null;
    grant();
    await waiting;
    factory.close();
  });

  it("fails its next throttle() and release() with LEASE_EXPIRED once a renewal says the controller no longer counts its units", async () => {
    const { clock, handler, factory, tasks } = setup();
    await tasks.throttle(3);
    handler.held = 0; // the lease ended on the controller: its units went to others
    await clock.advance(1_000);
    await new Promise((done) => setImmediate(done));
    assert.throws(
      () => tasks.release(3),
      (error: unknown) =>
        error instanceof SluiceError &&
        error.code === "LEASE_EXPIRED" &&
        /throttler "tasks": the controller no longer counts 3 of the units client "w1\/Admitter\/0" held — a renewal answered that the controller counts 0/.test(
          error.message,
        ) &&
        error.details["lostUnits"] === 3 &&
        error.details["controllerHeld"] === 0,
    );
    assert.equal(handler.releases.length, 0, "nothing to give back: the controller holds none of them");
    const renewals = handler.renewals.length;
    await clock.advance(3_000);
    assert.equal(handler.renewals.length, renewals, "it stops renewing units it no longer holds");
    // Once told, the client starts afresh: the next task is admitted as a new grant.
    handler.held = null;
    await tasks.throttle(1);
    tasks.release(1);

    // Partly lost: the controller counts 1 of 4; the next throttle() fails, and a release gives back only that 1.
    await tasks.throttle(4);
    handler.held = 1;
    await clock.advance(1_000);
    await new Promise((done) => setImmediate(done));
    await assert.rejects(
      tasks.throttle(1),
      (error: unknown) => error instanceof SluiceError && error.code === "LEASE_EXPIRED" && error.details["lostUnits"] === 3,
    );
    tasks.release(4);
    await new Promise((done) => setImmediate(done));
    assert.deepEqual(handler.releases.map((r) => r.amount).slice(-1), [1]);
    factory.close();
  });

  it("counts its units lost after this process sent no renewal for lease_timeout (a stall), even before a renewal answers", async () => {
    const { clock, handler, factory, tasks } = setup();
    await tasks.throttle(2);
    // The event loop blocked (or SIGSTOP) for 4 s with a 3 s lease: no renewal went out. The clock
    // jumps without running the renewal timers, as a stopped process sees it.
    clock.stalledMs = 4_000;
    assert.throws(
      () => tasks.release(2),
      (error: unknown) =>
        error instanceof SluiceError && error.code === "LEASE_EXPIRED" && /sent no renewal for longer than lease_timeout \(3000 ms\)/.test(error.message),
    );
    assert.equal(handler.renewals.length, 0);
    factory.close();
  });
});
