import { hostname } from "node:os";
import { controllerAddressesOf, type PipelineSpec } from "@sluice/spec";
import { defaultWorkerId } from "@sluice/runtime";
import type { TracedService } from "./tracing.ts";

// The two services a Jaeger user sees, whatever the deployment: `sluice-worker` (iteration,
// Input.Throttle, Process, Output, Commit) and `sluice-controller` (RequestQuota). Resource
// attributes say which pipeline, computations and worker a span came from, so one Jaeger can hold
// several pipelines and workers apart (search by tag, e.g. sluice.pipeline=enricher).

export const WORKER_SERVICE = "sluice-worker";
export const CONTROLLER_SERVICE = "sluice-controller";

/** The worker side of `sluice run` / `sluice worker`; it runs every computation of the spec. */
export function workerService(spec: PipelineSpec, workerId: string | undefined): TracedService {
  const id = workerId ?? defaultWorkerId();
  return {
    name: WORKER_SERVICE,
    instanceId: id,
    attributes: {
      "sluice.pipeline": spec.pipeline,
      "sluice.computations": Object.keys(spec.computations),
      "sluice.worker_id": id,
    },
  };
}

/** `sluice controller`, or the controller embedded in `sluice run` (then its instance is the worker's). */
export function controllerService(spec: PipelineSpec, where: { readonly embeddedIn?: string }): TracedService {
  return {
    name: CONTROLLER_SERVICE,
    instanceId: where.embeddedIn !== undefined ? `${where.embeddedIn}/controller` : `${hostname()}-${process.pid}`,
    attributes: {
      "sluice.pipeline": spec.pipeline,
      "sluice.computations": Object.keys(spec.computations),
      "sluice.throttlers": Object.keys(spec.dynamic_spec.throttlers),
      "sluice.controller.embedded": where.embeddedIn !== undefined,
    },
  };
}

/** `sluice run`: the worker, plus the embedded controller unless the spec names a controller to use. */
export function runServices(spec: PipelineSpec, workerId: string | undefined): { service: TracedService; embedded?: TracedService } {
  const service = workerService(spec, workerId);
  if (controllerAddressesOf(spec.controller).length > 0) return { service };
  return { service, embedded: controllerService(spec, { embeddedIn: service.instanceId }) };
}
