import type { Tracer } from "@opentelemetry/api";
import { systemClock } from "@sluice/core";
import { DistributedThrottlerFactory } from "@sluice/client";
import type { PipelineSpec } from "@sluice/spec";
import { defineComputation, type ComputationDefinition, type Sink } from "../src/index.ts";
import { Job } from "../src/job/job.ts";
import { ComputationStats } from "../src/job/computation-stats.ts";
import { FakeQuotaClient } from "@sluice/protocol/testing";

/**
 * A Job of partition 0 of `stream` on worker "w", throttled by `spec`'s dynamic_spec through a fake
 * quota client, its errors collected in `errors`. No waits: the restart backoff is 0, so the system
 * clock's sleep(0) ends at once.
 */
export function testJob(options: {
  readonly spec: PipelineSpec;
  readonly computationName: string;
  readonly computation: ComputationDefinition;
  readonly sink: Sink;
  readonly tracer: Tracer;
  readonly errors: string[];
  readonly stream?: string;
}): Job {
  const { spec, computationName, errors } = options;
  const throttlers = new DistributedThrottlerFactory({
    computation: computationName,
    clientId: `w/${computationName}/0`,
    client: () => new FakeQuotaClient(),
    clock: systemClock,
  });
  throttlers.reconfigure(spec.dynamic_spec);
  return new Job({
    pipeline: spec,
    computationName,
    computation: defineComputation(options.computation),
    stream: options.stream ?? "input",
    partition: 0,
    workerId: "w",
    sink: options.sink,
    throttlers,
    dynamicSpec: () => spec.dynamic_spec,
    stats: new ComputationStats(computationName),
    clock: systemClock,
    log: { info: () => {}, warn: () => {}, error: (line) => void errors.push(line) },
    tracer: options.tracer,
    restartBackoffMs: { min: 0, max: 0 },
  });
}
