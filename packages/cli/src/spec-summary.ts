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
  // A concurrency throttler's limit counts units held at once, a rate throttler's units per second.
  const unit = throttler.kind === "concurrency" ? " at once" : "/s";
  const adaptive = throttler.adaptive;
  if (adaptive) return `adaptive ${adaptive.min_limit}..${adaptive.max_limit}${unit}${adaptive.dry_run ? " (dry run)" : ""}`;
  const limit = effectiveLimit(throttler);
  if (limit === null) return "unlimited";
  const shaped = throttler.smooth ? ", smooth" : "";
  return throttler.use_class_weights_as_limit ? `${limit}${unit} from class weights${shaped}` : `${limit}${unit}${shaped}`;
}

function count(n: number, noun: string): string {
  return `${n} ${noun}${n === 1 ? "" : "s"}`;
}
