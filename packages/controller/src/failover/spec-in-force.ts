import { validateDynamicSpec, type DynamicSpec } from "@sluice/spec";
import type { ControllerState } from "@sluice/failover-ports";

export interface SpecInForce {
  readonly spec: DynamicSpec;
  readonly version: number;
  /** For the takeover's log line; "persisted" when it came from the state topic. */
  readonly origin: string;
}

/**
 * The dynamic_spec a new leader serves (docs/design.md §5.2): the persisted one and its version, so a
 * reconfiguration survives failovers and restarts; the spec file's only while nothing is persisted.
 * A persisted spec this pipeline no longer accepts (its computations changed) gives way to the
 * file's, under the next version so that watchers still see the version grow.
 */
export function specInForce(state: ControllerState, fileSpec: DynamicSpec, computations: readonly string[], log: (line: string) => void): SpecInForce {
  const persisted = state.spec;
  if (persisted === null) return { spec: fileSpec, version: 1, origin: "the spec file's" };
  let parsed: unknown;
  try {
    parsed = JSON.parse(persisted.dynamicSpecJson);
  } catch {
    parsed = undefined;
  }
  const result = validateDynamicSpec(parsed, { computations, pathPrefix: "dynamic_spec" });
  if (result.ok) return { spec: result.value, version: persisted.version, origin: "persisted" };
  const next = persisted.version + 1;
  log(
    `the persisted dynamic_spec version ${persisted.version} no longer fits this pipeline ` +
      `(${result.issues.map((i) => `${i.path}: ${i.message}`).join("; ")}); the spec file's applies as version ${next}`,
  );
  return { spec: fileSpec, version: next, origin: "the spec file's, the persisted one being invalid" };
}
