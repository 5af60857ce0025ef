// The controller's RequestQuota path with no transport: Controller.requestQuotaNow called in this
// process, round `keys` keys of a keyed throttler whose limit never binds (or its unkeyed twin), a
// fresh UUID request id per call, as a worker's refill carries. What a grant costs the controller
// itself, for comparing with group 9 (b)'s figure over the wire (bench/profile-keys.ts --in-process).
import { randomUUID } from "node:crypto";
import { systemClock } from "@sluice/core";
import { Controller } from "@sluice/controller";
import type { CallContext } from "@sluice/protocol";
import { validateDynamicSpec } from "@sluice/spec";

/** Grants per CPU-second of this process over `rounds` rounds of `perRound` calls each (one figure per round). */
export function inProcessKeyGrants(options: { keys: number; keyed: boolean; rounds: number; perRound: number }): number[] {
  const parsed = validateDynamicSpec({ throttlers: { per_key: { limit: 1_000_000, keyed: { max_keys: 100_000 } }, one: { limit: 1_000_000 } } });
  if (!parsed.ok) throw new Error(JSON.stringify(parsed.issues));
  const controller = new Controller({ dynamicSpec: parsed.value, computations: [], clock: systemClock });
  const names = Array.from({ length: options.keys }, (_, i) => `key-${i}`);
  // A QuotaStream call's context: a deadline, a cancellation nobody fires, no metadata.
  const context = {
    deadlineAt: Date.now() + 3_600_000,
    metadata: {},
    cancellation: { isCancelled: false, cancelReason: undefined, onCancel() {} },
    get signal(): AbortSignal {
      throw new Error("not read on this path");
    },
  } as unknown as CallContext;
  let n = 0;
  const figures: number[] = [];
  try {
    for (let round = 0; round < options.rounds; round++) {
      const start = process.cpuUsage();
      for (let i = 0; i < options.perRound; i++) {
        const key = options.keyed ? { key: names[n++ % options.keys] as string } : {};
        const call = {
          throttlerId: options.keyed ? "per_key" : "one",
          clientId: "worker/k0",
          amount: 1,
          timestampMs: 0,
          quotaClassId: "",
          requestId: randomUUID(),
          ...key,
        };
        if (controller.requestQuotaNow(call, context) instanceof Promise) throw new Error("a grant that should be at once waited");
      }
      const used = process.cpuUsage(start);
      figures.push(options.perRound / ((used.user + used.system) / 1e6));
    }
  } finally {
    controller.close();
  }
  return figures;
}
