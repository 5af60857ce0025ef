import type { Clock } from "@sluice/core";
import type { DynamicSpec } from "@sluice/spec";
import { Controller } from "../quota/controller.ts";
import type { ControllerState, ControllerStateStore } from "@sluice/failover-ports";
import type { FailoverControllerOptions } from "./failover-options.ts";
import { describeCause } from "./state-write-errors.ts";

/**
 * The first step of a takeover (docs/design.md §5.3): claim the state's writer, which fences every earlier
 * leader's writes, and only then read the state topic up to its end, so nothing a predecessor writes
 * later can be missing from what is read. Retries every `retryDelayMs` while the store fails,
 * because a leader that served without its predecessor's balances could start fuller than they
 * allow. Gives null when the takeover should stop: it was overtaken by another election
 * (`stillCurrent` false) or the controller is closing (`signal`).
 */
export async function readStateForTakeover(options: {
  readonly store: ControllerStateStore;
  readonly clock: Clock;
  readonly signal: AbortSignal;
  readonly retryDelayMs: number;
  readonly generation: number;
  readonly stillCurrent: () => boolean;
  readonly log: (line: string) => void;
}): Promise<ControllerState | null> {
  const { store, clock, signal, generation, stillCurrent, log } = options;
  for (;;) {
    try {
      await store.claimWriter(signal);
      return await store.catchUp(signal);
    } catch (error) {
      if (!stillCurrent()) return null;
      log(`taking over generation ${generation}: reading the state failed (${describeCause(error)}); retrying`);
      try {
        await clock.sleep(options.retryDelayMs, signal);
      } catch {
        return null; // closed
      }
      if (!stillCurrent()) return null;
    }
  }
}

/**
 * The Controller a new leader serves with: the group's options and the dynamic_spec in force.
 * `onStateChanged` is told of every decision of an adaptive loop and of every ended lease or grown
 * silence of a concurrency holder, because these change persisted state even when no grant does.
 */
export function buildLeaderController(
  options: FailoverControllerOptions,
  spec: DynamicSpec,
  version: number,
  onStateChanged: (inner: Controller) => void,
): Controller {
  const inner: Controller = new Controller({
    dynamicSpec: spec,
    computations: options.computations,
    clock: options.clock,
    initialVersion: version,
    ...(options.log ? { log: options.log } : {}),
    ...(options.tracer ? { tracer: options.tracer } : {}),
    ...(options.detachedGraceMs !== undefined ? { detachedGraceMs: options.detachedGraceMs } : {}),
    ...(options.baseDir !== undefined ? { baseDir: options.baseDir } : {}),
    ...(options.loadSourceOf ? { loadSourceOf: options.loadSourceOf } : {}),
    onAdaptiveDecision: () => onStateChanged(inner),
    onLeasesChanged: () => onStateChanged(inner),
  });
  return inner;
}
