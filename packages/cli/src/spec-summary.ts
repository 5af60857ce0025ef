import { effectiveLimit, type PipelineSpec, type ThrottlerSpec } from "@sluice/spec";

/** `enricher: 2 streams, 1 computation, 1 throttler (external_api_quota: 100/s)` */
export function summarizeSpec(spec: PipelineSpec): string {
  const throttlers = Object.entries(spec.dynamic_spec.throttlers);
  const limits = throttlers.map(([id, throttler]) => `${id}: ${describeLimit(throttler)}`);
  return (
    `${spec.pipeline}: ${count(Object.keys(spec.streams).length, "stream")}, ` +
    `${count(Object.keys(spec.computations).length, "computation")}, ` +
    `${count(throttlers.length, "throttler")}` +
    (limits.length === 0 ? "" : ` (${limits.join(", ")})`)
  );
}

function describeLimit(throttler: ThrottlerSpec): string {
  const adaptive = throttler.adaptive;
  if (adaptive) return `adaptive ${adaptive.min_limit}..${adaptive.max_limit}/s${adaptive.dry_run ? " (dry run)" : ""}`;
  const limit = effectiveLimit(throttler);
  if (limit === null) return "unlimited";
  return throttler.use_class_weights_as_limit ? `${limit}/s from class weights` : `${limit}/s`;
}

function count(n: number, noun: string): string {
  return `${n} ${noun}${n === 1 ? "" : "s"}`;
}
