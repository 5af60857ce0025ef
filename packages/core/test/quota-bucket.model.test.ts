import assert from "node:assert/strict";
import { describe, it } from "node:test";
import fc from "fast-check";
import {
  effectiveLimitOf,
  QuotaBucket,
  quotaBucketConfig,
  REQUEST_IDS_PER_QUEUE_SLOT,
  type Admission,
  type QuotaBucketConfig,
} from "../src/index.ts";

/**
 * Model-based test of QuotaBucket (issue 9, item 15): random sequences of operations run against the
 * real bucket and a small reference model of what each request id is doing. The model predicts what it
 * can predict exactly (every admission, every cancel and detach, when deadlines fire, what is
 * remembered), and after every step the invariants are checked:
 *
 * - no request id is granted twice within its grace;
 * - net granted ≤ capacity + limit × elapsed + releases + one request's overdraft;
 * - the queue never exceeds max_queue_size;
 * - memory (entries, queue entries, timers, remembered ids) is bounded by live requests and remembered ids;
 * - every request ends: granted, refused, cancelled, or timed out exactly at its deadline.
 *
 * Which waiting request is granted when is the scheduler's business (tested elsewhere); the model only
 * checks that a grant goes to a request that was waiting.
 */

type Status = "queued" | "detached" | "granted" | "cancelled" | "forgotten";

interface ModelRequest {
  /** The client's request id ("" = anonymous). */
  readonly requestId: string;
  status: Status;
  deadlineAt: number | null;
  detachedUntil: number | null;
  grantedAt: number | null;
  readonly amount: number;
}

const GRACE_MS = 4000;
const CLASSES = ["a", "b", "c"] as const;

class Model {
  now = 0;
  config: QuotaBucketConfig;
  /** By bucket key (what admissions and settlements name). */
  readonly requests = new Map<string, ModelRequest>();
  /** Detached keys, oldest detach first (the order in which the bucket evicts them past the bound). */
  detachedOrder: string[] = [];
  /** Upper bound of net grants; Infinity while unlimited. */
  budget: number;
  largestChunk = 0;
  maxQueueSizeEver: number;
  settledAmount = 0;
  triedAmount = 0;
  anonymousSeq = 0;

  constructor(config: QuotaBucketConfig) {
    this.config = config;
    const limit = effectiveLimitOf(config);
    this.budget = limit === null ? Number.POSITIVE_INFINITY : (limit * config.periodMs) / 1000;
    this.maxQueueSizeEver = config.maxQueueSize;
  }

  pending(): number {
    let n = 0;
    for (const r of this.requests.values()) if (r.status === "queued") n += 1;
    return n;
  }

  held(): number {
    let n = 0;
    for (const r of this.requests.values()) if (r.status === "queued" || r.status === "detached") n += 1;
    return n;
  }

  /** Granted ids within their grace: what the bucket must still remember. */
  remembered(): number {
    let n = 0;
    for (const r of this.requests.values()) {
      if (r.status === "granted" && r.requestId !== "" && r.grantedAt !== null && this.now < r.grantedAt + GRACE_MS) n += 1;
    }
    return n;
  }

  detach(key: string, request: ModelRequest): void {
    request.status = "detached";
    request.detachedUntil = this.now + GRACE_MS;
    this.detachedOrder = this.detachedOrder.filter((k) => k !== key);
    this.detachedOrder.push(key);
    while (this.detachedOrder.length > this.config.maxQueueSize) {
      const oldest = this.detachedOrder.shift();
      const evicted = oldest === undefined ? undefined : this.requests.get(oldest);
      if (evicted) evicted.status = "forgotten";
    }
  }
}

interface Real {
  readonly bucket: QuotaBucket;
}

function keyOf(requestId: string): string {
  return requestId.startsWith("~") ? `~${requestId}` : requestId;
}

/** Polls at `now`, checks every settlement against the model and then every invariant. */
function settle(model: Model, real: Real): void {
  for (const s of real.bucket.poll(model.now)) {
    const request = model.requests.get(s.requestId);
    assert.ok(request, `settlement for unknown request ${s.requestId}`);
    assert.equal(request.status, "queued", `${s.kind} of ${s.requestId}, which was ${request.status}`);
    if (s.kind === "granted") {
      request.status = "granted";
      request.grantedAt = model.now;
      model.settledAmount += s.amount;
      assert.equal(s.amount, request.amount);
    } else {
      assert.equal(request.deadlineAt, model.now, `${s.requestId} timed out at ${model.now}, its deadline is ${request.deadlineAt}`);
      assert.equal(s.error.code, "QUOTA_TIMEOUT");
      model.detach(s.requestId, request);
    }
  }
  checkInvariants(model, real);
}

function checkInvariants(model: Model, real: Real): void {
  const snapshot = real.bucket.snapshot(model.now);
  const memory = real.bucket.memory();
  const net = snapshot.counters.granted - snapshot.counters.refunded;
  const slack = 1e-6 * Math.max(1, Math.abs(model.budget === Number.POSITIVE_INFINITY ? 0 : model.budget));
  assert.ok(net <= model.budget + model.largestChunk + slack, `net granted ${net} exceeds ${model.budget} + overdraft ${model.largestChunk}`);
  assert.ok(net + 1e-6 >= model.settledAmount + model.triedAmount - 1e-6 * Math.max(1, net), `net ${net} below what settled`);
  assert.equal(snapshot.pendingRequests, model.pending(), "pending requests");
  assert.ok(snapshot.pendingRequests <= model.maxQueueSizeEver, "queue within max_queue_size");
  assert.equal(snapshot.detachedRequests, model.detachedOrder.length, "detached requests");
  assert.equal(memory.requests, model.held(), "requests held = waiting + detached");
  assert.equal(memory.rememberedRequestIds, model.remembered(), "remembered ids = ids granted within their grace");
  assert.ok(memory.rememberedRequestIds <= model.maxQueueSizeEver * REQUEST_IDS_PER_QUEUE_SLOT, "remembered ids within their bound");
  // The model remembers every id for its whole grace: it holds only while no id was forgotten early.
  assert.equal(memory.forgottenEarlyRequestIds, 0, "the model's runs stay below the bound");
  assert.ok(memory.queueEntries <= 2 * snapshot.pendingRequests + 65 * (CLASSES.length + 1), `${memory.queueEntries} queue entries`);
  assert.ok(memory.timers <= 2 * memory.requests + 1024 + 1, `${memory.timers} timers for ${memory.requests} requests`);
  // Every request ends: none still waits past its own deadline.
  for (const [key, r] of model.requests) {
    if (r.status === "queued" && r.deadlineAt !== null) assert.ok(model.now < r.deadlineAt, `${key} still waits past its deadline`);
  }
}

type AmountChoice = number;
const amountArb: fc.Arbitrary<AmountChoice> = fc.oneof(
  { weight: 6, arbitrary: fc.integer({ min: 0, max: 40 }) },
  { weight: 3, arbitrary: fc.double({ min: 0, max: 150, noNaN: true }) },
  { weight: 1, arbitrary: fc.constantFrom(-1, Number.NaN, Number.POSITIVE_INFINITY, Number.MAX_SAFE_INTEGER + 2) },
);

class Submit implements fc.Command<Model, Real> {
  constructor(
    readonly id: string,
    readonly amount: number,
    readonly classId: string,
    readonly timestampMs: number,
    readonly deadlineInMs: number | null,
  ) {}
  check(): boolean {
    return true;
  }
  run(model: Model, real: Real): void {
    const deadlineAt = this.deadlineInMs === null ? null : model.now + this.deadlineInMs;
    const admission = real.bucket.submit(
      { requestId: this.id, clientId: "c", amount: this.amount, timestampMs: this.timestampMs, classId: this.classId, deadlineAt },
      model.now,
    );
    const expected = this.predict(model);
    assert.equal(admission.kind, expected, `submit ${this.toString()}`);
    this.apply(model, admission, deadlineAt);
    settle(model, real);
  }
  private predict(model: Model): Admission["kind"] {
    if (typeof this.amount !== "number" || !Number.isFinite(this.amount) || this.amount < 0 || this.amount > Number.MAX_SAFE_INTEGER) return "refused";
    const existing = this.id === "" ? undefined : model.requests.get(keyOf(this.id));
    const remembered = existing?.status === "granted" && existing.grantedAt !== null && model.now < existing.grantedAt + GRACE_MS;
    const live = existing?.status === "queued" || existing?.status === "detached";
    if ((remembered || live) && existing?.amount !== this.amount) return "refused"; // an id names one request
    if (remembered) return "granted";
    if (existing?.status === "queued") return "joined";
    const detached = existing?.status === "detached";
    if (this.amount === 0 && !detached) return "granted";
    if (model.pending() >= model.config.maxQueueSize) return "refused";
    if (detached) return "reattached";
    return "queued";
  }
  private apply(model: Model, admission: Admission, deadlineAt: number | null): void {
    const key = admission.requestId;
    if (this.id !== "") assert.equal(key, keyOf(this.id), "a client id keeps its own key");
    else if (admission.kind !== "refused") assert.ok(!model.requests.has(key), "an anonymous key is new");
    const existing = model.requests.get(key);
    if (admission.kind === "queued") {
      model.requests.set(key, { requestId: this.id, status: "queued", deadlineAt, detachedUntil: null, grantedAt: null, amount: this.amount });
      model.largestChunk = Math.max(model.largestChunk, this.amount);
    } else if (admission.kind === "joined" && existing) {
      existing.deadlineAt = existing.deadlineAt === null || deadlineAt === null ? null : Math.max(existing.deadlineAt, deadlineAt);
    } else if (admission.kind === "reattached" && existing) {
      existing.status = "queued";
      existing.deadlineAt = deadlineAt;
      existing.detachedUntil = null;
      model.detachedOrder = model.detachedOrder.filter((k) => k !== key);
    } else if (admission.kind === "granted" && this.amount > 0) {
      assert.equal(existing?.status, "granted", "an immediate grant of a non-zero amount is only a replay");
    }
  }
  toString(): string {
    return `submit(${JSON.stringify(this.id)}, ${this.amount}, class ${JSON.stringify(this.classId)}, ts ${this.timestampMs}, deadline +${this.deadlineInMs})`;
  }
}

/** Picks one of the requests the model knows, by index, so that cancels and detaches hit live ones. */
function pick(model: Model, index: number): string | undefined {
  const keys = [...model.requests.keys()];
  return keys.length === 0 ? undefined : keys[index % keys.length];
}

class Cancel implements fc.Command<Model, Real> {
  constructor(readonly index: number) {}
  check(): boolean {
    return true;
  }
  run(model: Model, real: Real): void {
    const key = pick(model, this.index);
    if (key === undefined) return;
    const request = model.requests.get(key);
    const live = request?.status === "queued" || request?.status === "detached";
    assert.equal(real.bucket.cancel(key, model.now), live, `cancel ${key} (${request?.status})`);
    if (request && live) {
      request.status = "cancelled";
      model.detachedOrder = model.detachedOrder.filter((k) => k !== key);
    }
    settle(model, real);
  }
  toString(): string {
    return `cancel(#${this.index})`;
  }
}

class Detach implements fc.Command<Model, Real> {
  constructor(readonly index: number) {}
  check(): boolean {
    return true;
  }
  run(model: Model, real: Real): void {
    const key = pick(model, this.index);
    if (key === undefined) return;
    const request = model.requests.get(key);
    const queued = request?.status === "queued";
    assert.equal(real.bucket.detach(key, model.now), queued, `detach ${key} (${request?.status})`);
    if (request && queued) model.detach(key, request);
    settle(model, real);
  }
  toString(): string {
    return `detach(#${this.index})`;
  }
}

class Release implements fc.Command<Model, Real> {
  constructor(
    readonly amount: number,
    readonly classId: string,
  ) {}
  check(): boolean {
    return true;
  }
  run(model: Model, real: Real): void {
    real.bucket.release(this.amount, this.classId, model.now);
    model.budget += this.amount;
    settle(model, real);
  }
  toString(): string {
    return `release(${this.amount}, ${JSON.stringify(this.classId)})`;
  }
}

class TryAcquire implements fc.Command<Model, Real> {
  constructor(
    readonly amount: number,
    readonly classId: string,
  ) {}
  check(): boolean {
    return true;
  }
  run(model: Model, real: Real): void {
    const waiting = model.pending() > 0;
    const taken = real.bucket.tryAcquire(this.amount, this.classId, model.now);
    if (this.amount === 0) assert.equal(taken, true, "tryAcquire(0) always succeeds");
    else if (waiting) assert.equal(taken, false, "tryAcquire never jumps the queue");
    if (taken) {
      model.triedAmount += this.amount;
      model.largestChunk = Math.max(model.largestChunk, this.amount);
    }
    settle(model, real);
  }
  toString(): string {
    return `tryAcquire(${this.amount}, ${JSON.stringify(this.classId)})`;
  }
}

class Reconfigure implements fc.Command<Model, Real> {
  constructor(readonly config: QuotaBucketConfig) {}
  check(): boolean {
    return true;
  }
  run(model: Model, real: Real): void {
    const wasLimit = effectiveLimitOf(model.config);
    real.bucket.reconfigure(this.config, model.now);
    const limit = effectiveLimitOf(this.config);
    if (limit === null) model.budget = Number.POSITIVE_INFINITY;
    else if (wasLimit === null) {
      // Leaving unlimited starts full: from what is out now, one more capacity.
      const snapshot = real.bucket.snapshot(model.now);
      model.budget = snapshot.counters.granted - snapshot.counters.refunded + (limit * this.config.periodMs) / 1000;
    }
    model.config = this.config;
    model.maxQueueSizeEver = Math.max(model.maxQueueSizeEver, this.config.maxQueueSize);
    // a lower max_queue_size applies to detached requests at the next detach; nothing is evicted now
    settle(model, real);
  }
  toString(): string {
    const c = this.config;
    return `reconfigure(limit ${c.limit}, period ${c.periodMs}, classes ${JSON.stringify(c.classWeights)}, weightsAsLimit ${c.useClassWeightsAsLimit}, maxGrant ${c.maxGrantAmount}, maxQueue ${c.maxQueueSize})`;
  }
}

class Advance implements fc.Command<Model, Real> {
  constructor(readonly ms: number) {}
  check(): boolean {
    return true;
  }
  run(model: Model, real: Real): void {
    const until = model.now + this.ms;
    let idleRepeats = 0;
    for (let next = real.bucket.nextWakeAt(model.now); next !== null && next <= until; next = real.bucket.nextWakeAt(model.now)) {
      assert.ok(next >= model.now, "wake-ups never go back in time");
      const limit = effectiveLimitOf(model.config);
      if (limit !== null) model.budget += ((next - model.now) * limit) / 1000;
      const before = real.bucket.snapshot(next).counters.granted;
      const wasAt = model.now;
      model.now = next;
      this.forgetGraces(model);
      settle(model, real);
      const progressed = real.bucket.snapshot(model.now).counters.granted !== before || next !== wasAt;
      idleRepeats = progressed ? 0 : idleRepeats + 1;
      assert.ok(idleRepeats < 3, `busy loop: the bucket asks to be woken at ${next} again and again with nothing to do`);
    }
    const limit = effectiveLimitOf(model.config);
    if (limit !== null) model.budget += ((until - model.now) * limit) / 1000;
    model.now = until;
    this.forgetGraces(model);
    settle(model, real);
  }
  /** Detached requests whose grace ended are forgotten (their timer fires at `detachedUntil`). */
  private forgetGraces(model: Model): void {
    for (const [key, r] of model.requests) {
      if (r.status === "detached" && r.detachedUntil !== null && r.detachedUntil <= model.now) {
        r.status = "forgotten";
        model.detachedOrder = model.detachedOrder.filter((k) => k !== key);
      }
    }
  }
  toString(): string {
    return `advance(${this.ms})`;
  }
}

const classArb = fc.constantFrom("", "a", "b", "c", "default", "unknown");
/** A handful of ids, so that retries, joins and re-attaches happen; "~0" and "~1" look like anonymous keys. */
const idArb = fc.oneof({ weight: 2, arbitrary: fc.constant("") }, { weight: 8, arbitrary: fc.constantFrom("r0", "r1", "r2", "r3", "r4", "r5", "~0", "~1") });

const configArb: fc.Arbitrary<QuotaBucketConfig> = fc
  .record({
    limit: fc.oneof(fc.constant(null), fc.constant(0), fc.integer({ min: 1, max: 100 })),
    periodMs: fc.integer({ min: 100, max: 5000 }),
    classes: fc.subarray([...CLASSES]),
    weights: fc.tuple(fc.double({ min: 0.25, max: 8, noNaN: true }), fc.double({ min: 0.25, max: 8, noNaN: true }), fc.double({ min: 0.25, max: 8, noNaN: true })),
    weightsAsLimit: fc.boolean(),
    maxGrantAmount: fc.option(fc.oneof(fc.integer({ min: 1, max: 20 }), fc.constant(0.5)), { nil: null }),
    maxQueueSize: fc.integer({ min: 1, max: 8 }),
  })
  .map(({ limit, periodMs, classes, weights, weightsAsLimit, maxGrantAmount, maxQueueSize }) => {
    const classWeights: Record<string, number> = {};
    classes.forEach((id, i) => (classWeights[id] = weights[i] ?? 1));
    return quotaBucketConfig({
      limit,
      periodMs,
      classWeights,
      // weights as limit needs a class (validation refuses it otherwise)
      useClassWeightsAsLimit: weightsAsLimit && classes.length > 0,
      maxGrantAmount,
      maxQueueSize,
      detachedGraceMs: GRACE_MS,
    });
  });

const commands = [
  fc.tuple(idArb, amountArb, classArb, fc.integer({ min: 0, max: 1000 }), fc.option(fc.integer({ min: 1, max: 6000 }), { nil: null })).map(
    ([id, amount, classId, ts, deadline]) => new Submit(id, amount, classId, ts, deadline),
  ),
  fc.tuple(idArb, amountArb, classArb, fc.integer({ min: 0, max: 1000 }), fc.option(fc.integer({ min: 1, max: 6000 }), { nil: null })).map(
    ([id, amount, classId, ts, deadline]) => new Submit(id, amount, classId, ts, deadline),
  ),
  fc.nat().map((i) => new Cancel(i)),
  fc.nat().map((i) => new Detach(i)),
  fc.tuple(fc.integer({ min: 0, max: 30 }), classArb).map(([amount, classId]) => new Release(amount, classId)),
  fc.tuple(fc.oneof(fc.integer({ min: 0, max: 30 }), fc.constant(-1)), classArb).map(([amount, classId]) => new TryAcquire(amount, classId)),
  configArb.map((config) => new Reconfigure(config)),
  fc.integer({ min: 0, max: 3000 }).map((ms) => new Advance(ms)),
  fc.integer({ min: 0, max: 3000 }).map((ms) => new Advance(ms)),
];

describe("QuotaBucket model-based test", () => {
  it("keeps every invariant after every step of random operations, and every request ends", () => {
    fc.assert(
      fc.property(configArb, fc.commands(commands, { maxCommands: 80, size: "max" }), (config, cmds) => {
        const model = new Model(config);
        const real: Real = { bucket: new QuotaBucket("model", config, 0) };
        fc.modelRun(() => ({ model, real }), cmds);
        // The end: past every deadline and grace, then without a limit, nothing may still wait.
        new Advance(10_000).run(model, real);
        new Reconfigure({ ...model.config, limit: null, useClassWeightsAsLimit: false, maxGrantAmount: null }).run(model, real);
        assert.equal(model.pending(), 0, "every request ended");
        // Cancel what is still detached: then net granted is exactly what settled plus what was tried.
        for (const [key, r] of model.requests) {
          if (r.status === "detached") new Cancel([...model.requests.keys()].indexOf(key)).run(model, real);
        }
        const final = real.bucket.snapshot(model.now);
        const net = final.counters.granted - final.counters.refunded;
        const expected = model.settledAmount + model.triedAmount;
        assert.ok(Math.abs(net - expected) <= 1e-6 * Math.max(1, expected), `net granted ${net}, settled + tried ${expected}: refunds match grants`);
      }),
      { numRuns: 400, includeErrorInReport: true },
    );
  });
});
