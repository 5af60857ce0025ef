// The operations of the model-based test of QuotaBucket (quota-bucket.model.test.ts), as fast-check
// commands run against the real bucket and the reference model (quota-bucket-reference-model.ts), and
// the arbitraries that draw them and the bucket's configurations.
import assert from "node:assert/strict";
import fc from "fast-check";
import { effectiveLimitOf, quotaBucketConfig, type Admission, type QuotaBucketConfig } from "../src/index.ts";
import { CLASSES, GRACE_MS, keyOf, settle, type Model, type Real } from "./quota-bucket-reference-model.ts";

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

export class Cancel implements fc.Command<Model, Real> {
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

export class Reconfigure implements fc.Command<Model, Real> {
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

export class Advance implements fc.Command<Model, Real> {
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

export const configArb: fc.Arbitrary<QuotaBucketConfig> = fc
  .record({
    limit: fc.oneof(fc.constant(null), fc.constant(0), fc.integer({ min: 1, max: 100 })),
    periodMs: fc.integer({ min: 100, max: 5000 }),
    classes: fc.subarray([...CLASSES]),
    weights: fc.tuple(
      fc.double({ min: 0.25, max: 8, noNaN: true }),
      fc.double({ min: 0.25, max: 8, noNaN: true }),
      fc.double({ min: 0.25, max: 8, noNaN: true }),
    ),
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

export const commands = [
  fc
    .tuple(idArb, amountArb, classArb, fc.integer({ min: 0, max: 1000 }), fc.option(fc.integer({ min: 1, max: 6000 }), { nil: null }))
    .map(([id, amount, classId, ts, deadline]) => new Submit(id, amount, classId, ts, deadline)),
  fc
    .tuple(idArb, amountArb, classArb, fc.integer({ min: 0, max: 1000 }), fc.option(fc.integer({ min: 1, max: 6000 }), { nil: null }))
    .map(([id, amount, classId, ts, deadline]) => new Submit(id, amount, classId, ts, deadline)),
  fc.nat().map((i) => new Cancel(i)),
  fc.nat().map((i) => new Detach(i)),
  fc.tuple(fc.integer({ min: 0, max: 30 }), classArb).map(([amount, classId]) => new Release(amount, classId)),
  fc.tuple(fc.oneof(fc.integer({ min: 0, max: 30 }), fc.constant(-1)), classArb).map(([amount, classId]) => new TryAcquire(amount, classId)),
  configArb.map((config) => new Reconfigure(config)),
  fc.integer({ min: 0, max: 3000 }).map((ms) => new Advance(ms)),
  fc.integer({ min: 0, max: 3000 }).map((ms) => new Advance(ms)),
];
