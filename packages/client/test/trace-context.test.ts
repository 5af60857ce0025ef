// own process: it registers OpenTelemetry's global tracer provider
// The W3C trace context a refill RPC carries (docs/design.md §3): the span of the throttle() caller it is
// sent for, also when the prefetching client sends it later from a callback. With an SDK registered
// (AsyncLocalStorage context, W3C propagator), as `sluice run` and `sluice worker` do.
import assert from "node:assert/strict";
import { after, describe, it } from "node:test";
import { trace, type Span } from "@opentelemetry/api";
import { InMemorySpanExporter, SimpleSpanProcessor } from "@opentelemetry/sdk-trace-base";
import { NodeTracerProvider } from "@opentelemetry/sdk-trace-node";
import { ManualClock } from "@sluice/core";
import type { CallOptions, RequestQuotaCall } from "@sluice/protocol";
import { validateDynamicSpec } from "@sluice/spec";
import { DistributedThrottlerFactory } from "../src/index.ts";
import { FakeQuotaClient } from "@sluice/protocol/testing";

const provider = new NodeTracerProvider({ spanProcessors: [new SimpleSpanProcessor(new InMemorySpanExporter())] });
provider.register();
after(() => provider.shutdown());
const tracer = trace.getTracer("test");

/** Records each call's metadata and answers only when the test says so. */
class HeldQuotaClient extends FakeQuotaClient {
  readonly sent: { call: RequestQuotaCall; metadata: Readonly<Record<string, string>>; grant: () => void }[] = [];
  override requestQuota(call: RequestQuotaCall, options?: CallOptions) {
    this.calls.push(call);
    return new Promise<{ granted: number; waitedMs: number }>((resolve) => {
      this.sent.push({ call, metadata: options?.metadata ?? {}, grant: () => resolve({ granted: call.amount, waitedMs: 0 }) });
    });
  }
}

function setup() {
  const client = new HeldQuotaClient();
  const factory = new DistributedThrottlerFactory({ computation: "C", clientId: "w/C/0", client: () => client, clock: new ManualClock(0) });
  const spec = validateDynamicSpec({
    throttlers: { rows: { limit: 100, request_period: "100ms" } },
    computations: { C: { input_rows_throttler_id: "rows" } },
  });
  if (!spec.ok) throw new Error(JSON.stringify(spec.issues));
  factory.reconfigure(spec.value);
  return { client, handle: factory.getThrottlerOrThrow("rows") };
}

/** The parent span id a `traceparent` names (version-traceid-spanid-flags). */
function parentOf(metadata: Readonly<Record<string, string>>): string | undefined {
  return metadata["traceparent"]?.split("-")[2];
}

function inSpan<T>(name: string, work: (span: Span) => T): { span: Span; result: T } {
  return tracer.startActiveSpan(name, (span) => {
    const result = work(span);
    span.end();
    return { span, result };
  });
}

const flush = () => new Promise((resolve) => setImmediate(resolve));

describe("trace context of refill RPCs", () => {
  it("a throttle() that misses the pool sends its refill under the caller's span", async () => {
    const { client, handle } = setup();
    const { span, result } = inSpan("Input.Throttle", () => handle.throttle(5));
    assert.equal(client.sent.length, 1);
    const first = client.sent[0];
    assert.ok(first);
    assert.match(first.metadata["traceparent"] ?? "", /^00-[0-9a-f]{32}-[0-9a-f]{16}-01$/);
    assert.equal(parentOf(first.metadata), span.spanContext().spanId);
    first.grant();
    await result;
  });

  it("a refill sent later from a callback goes under the latest caller, not the span that started the chain", async () => {
    const { client, handle } = setup();
    // A misses: refill 1 under A. When it is granted, demand has outrun the pool, so the client
    // keeps one refill queued (refill 2) from inside refill 1's callback.
    const a = inSpan("A", () => handle.throttle(5));
    client.sent[0]?.grant();
    await a.result;
    await flush();
    assert.equal(client.sent.length, 2, "refill 2 is queued ahead of demand");
    assert.equal(parentOf(client.sent[1]?.metadata ?? {}), a.span.spanContext().spanId);

    // B waits on refill 2, already in flight: no RPC of its own. Refill 2's callback (which runs in
    // A's async context) satisfies B and queues refill 3, which is fetched for B's demand.
    const b = inSpan("B", () => handle.throttle(1));
    assert.equal(client.sent.length, 2);
    client.sent[1]?.grant();
    await b.result;
    await flush();
    assert.equal(client.sent.length, 3, "refill 3 is queued ahead of demand");
    assert.equal(parentOf(client.sent[2]?.metadata ?? {}), b.span.spanContext().spanId, "refill 3 belongs to B's trace, not A's");
    assert.notEqual(client.sent[2]?.metadata["traceparent"]?.split("-")[1], a.span.spanContext().traceId);
  });

  it("outside any span the call carries no parent of anybody else", async () => {
    const { client, handle } = setup();
    const pending = handle.throttle(5);
    assert.equal(client.sent[0]?.metadata["traceparent"], undefined, "no active span: nothing to propagate");
    client.sent[0]?.grant();
    await pending;
  });
});
