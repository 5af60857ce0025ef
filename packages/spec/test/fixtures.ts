// A full, valid pipeline spec used as the base of the tests (every call returns a fresh copy), and a
// way to break one field of it.

export type SpecObject = Record<string, unknown>;

export function validSpec(): SpecObject {
  return {
    pipeline: "enricher",
    kafka: { brokers: ["127.0.0.1:19092", "[::1]:9092"], client_id: "sluice-test" },
    controller: { address: "127.0.0.1:7070" },
    streams: {
      requests: {
        topic: "requests",
        format: "json",
        partitions: 4,
        stream_delay: "2s",
        generator: { module: "./generate.ts", messages: 100, rate_per_second: 50 },
      },
      enriched: { topic: "enriched", format: "string" },
    },
    computations: {
      Enricher: { module: "./enricher.ts", inputs: ["requests"], outputs: ["enriched"], max_rows_per_batch: 100 },
    },
    dynamic_spec: {
      throttlers: {
        api: {
          limit: 100,
          period: "1s",
          request_period: "500ms",
          rpc_timeout: 5000,
          max_grant_amount: 10,
          classes: { vip: { weight: 3 }, batch: {} },
          retrying_channel: { retry_attempts: 5, min_backoff: "100ms", max_backoff: "2s" },
          max_queue_size: 500,
        },
        bytes: { limit: 1_000_000 },
      },
      computations: {
        Enricher: {
          input_rows_throttler_id: "api",
          input_rows_throttler_class_id: "vip",
          input_bytes_throttler_id: "bytes",
        },
      },
    },
  };
}

/** Marks a key for removal in `withChanges`. */
export const REMOVE = Symbol("remove");

/**
 * A copy of `base` with values set (or removed) at dotted paths such as
 * `dynamic_spec.throttlers.api.limit`; missing intermediate objects are created.
 */
export function withChanges(base: SpecObject, changes: Readonly<Record<string, unknown>>): SpecObject {
  const spec = structuredClone(base);
  for (const [dotted, value] of Object.entries(changes)) {
    const keys = dotted.split(".");
    const last = keys.pop() ?? "";
    let target: SpecObject = spec;
    for (const key of keys) {
      const next = target[key];
      if (typeof next === "object" && next !== null) target = next as SpecObject;
      else target = target[key] = {};
    }
    if (value === REMOVE) delete target[last];
    else target[last] = value;
  }
  return spec;
}
