// The reference model of the model-based test of QuotaBucket (quota-bucket.model.test.ts): what each
// request id is doing, as far as it can be predicted exactly, and the invariants checked after every step.
import assert from "node:assert/strict";
import { effectiveLimitOf, REQUEST_IDS_PER_QUEUE_SLOT, type QuotaBucket, type QuotaBucketConfig } from "../src/index.ts";

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

export const GRACE_MS = 4000;
export const CLASSES = ["a", "b", "c"] as const;

export class Model {
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

export interface Real {
  readonly bucket: QuotaBucket;
}

export function keyOf(requestId: string): string {
  return requestId.startsWith("~") ? `~${requestId}` : requestId;
}

/** Polls at `now`, checks every settlement against the model and then every invariant. */
export function settle(model: Model, real: Real): void {
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
