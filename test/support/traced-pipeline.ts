import { join } from "node:path";
import { NOOP_COMPUTATION, ROOT } from "./processes.ts";
import type { ThrottleTraceExpectation } from "./throttle-traces.ts";

// The throttled pipeline the tracing tests run: one computation on one partition (so the summed
// Input.Throttle wait is the pipeline's own throttling, not several jobs waiting side by side),
// 600 generated rows in batches of 50 through a 200 rows/s throttler in a declared class.

const ROWS = 600;
const BATCH = 50;
const LIMIT = 200;

export function throttledSpec(pipeline: string, controllerAddress?: string): Record<string, unknown> {
  return {
    pipeline,
    ...(controllerAddress ? { controller: { address: controllerAddress } } : {}),
    streams: {
      input: { topic: "input", partitions: 1, generator: { module: join(ROOT, "examples/quickstart/generate.ts"), messages: ROWS } },
    },
    computations: { Reader: { module: NOOP_COMPUTATION, inputs: ["input"], max_rows_per_batch: BATCH } },
    dynamic_spec: {
      throttlers: { rows: { limit: LIMIT, period: "1s", request_period: "100ms", classes: { bulk: { weight: 2 } } } },
      computations: { Reader: { input_rows_throttler_id: "rows", input_rows_throttler_class_id: "bulk" } },
    },
  };
}

export const THROTTLED_EXPECTATION: Omit<ThrottleTraceExpectation, "controllerInAnotherProcess"> = {
  computation: "Reader",
  throttlerId: "rows",
  classId: "bulk",
  rows: ROWS,
  maxRowsPerBatch: BATCH,
  limit: LIMIT,
  periodS: 1,
  requestPeriodS: 0.1,
};

/** The OpenTelemetry environment of a traced child: nothing from the developer's shell decides it. */
export function otelEnv(endpoint: string | null): NodeJS.ProcessEnv {
  return {
    OTEL_EXPORTER_OTLP_ENDPOINT: endpoint ?? "",
    OTEL_EXPORTER_OTLP_TRACES_ENDPOINT: "",
    OTEL_SDK_DISABLED: "",
    OTEL_TRACES_SAMPLER: "",
  };
}
