// services: processes
// docs/design.md §5.3, issue 19 item 9: a concurrency holder whose lease ended on a real `sluice controller`
// (its renewals stopped past lease_timeout, and the controller gave its units to another holder)
// learns it from its next renewal, and its next throttle()/release() fails with LEASE_EXPIRED
// instead of running on with units nobody counts.
import assert from "node:assert/strict";
import { after, it } from "node:test";
import { DistributedThrottlerFactory } from "@sluice/client";
import { isSluiceError, SluiceError, systemClock } from "@sluice/core";
import { createStreamQuotaClient, type QuotaServiceClient } from "@sluice/protocol";
import { validateDynamicSpec, type DynamicSpec } from "@sluice/spec";
import { startController, writeSpec, NOOP_COMPUTATION, type Child } from "../support/processes.ts";

const LEASE_MS = 1_000;
const children: Child[] = [];
const closers: (() => void)[] = [];
after(() => {
  for (const close of closers) close();
  for (const child of children) child.kill("SIGKILL");
});

const throttlers = { slots: { kind: "concurrency", limit: 2, lease_timeout: `${LEASE_MS}ms` } };

function dynamicSpec(): DynamicSpec {
  const result = validateDynamicSpec({ throttlers, computations: {} });
  if (!result.ok) throw new Error(JSON.stringify(result.issues));
  return result.value;
}

/** A holder's throttler handle over real gRPC; `cut` makes its renewals fail (a stall seen from the controller). */
function holder(address: string, clientId: string) {
  const grpc = createStreamQuotaClient(address);
  const state = { cut: false };
  const client: QuotaServiceClient = {
    ...grpc,
    renewLeases: (call, options) =>
      state.cut
        ? Promise.reject(new SluiceError("CONTROLLER_UNAVAILABLE", "renewals cut by the test"))
        : (grpc.renewLeases?.(call, options) ?? Promise.reject(new Error("no renewLeases"))),
  };
  const factory = new DistributedThrottlerFactory({ computation: "Admitter", clientId, client: () => client, clock: systemClock });
  factory.reconfigure(dynamicSpec());
  closers.push(() => {
    factory.close();
    grpc.close();
  });
  return { slots: factory.getThrottlerOrThrow("slots"), state };
}

it("a holder whose renewals stopped past lease_timeout gets LEASE_EXPIRED once the controller gave its units to another", async () => {
  const spec = writeSpec({
    pipeline: "lease-expired",
    streams: { input: { topic: "input" } },
    computations: { Reader: { module: NOOP_COMPUTATION, inputs: ["input"] } },
    dynamic_spec: { throttlers, computations: {} },
  });
  const controller = await startController(spec);
  children.push(controller.child);

  const stalled = holder(controller.address, "stalled/0");
  const other = holder(controller.address, "other/0");
  await stalled.slots.throttle(2);
  // The stalled holder's renewals stop reaching the controller; the other holder waits for units.
  stalled.state.cut = true;
  const startedAt = Date.now();
  await other.slots.throttle(2, { signal: AbortSignal.timeout(LEASE_MS + 20_000) });
  const handedOverMs = Date.now() - startedAt;
  // Not before the lease could have ended: its last renewal went out at most lease_timeout / 3 before the cut.
  assert.ok(handedOverMs >= LEASE_MS / 2, `the controller handed the units over after ${handedOverMs} ms, well before lease_timeout (${LEASE_MS} ms)`);

  // Renewals get through again: the next one answers that the controller counts nothing for it.
  stalled.state.cut = false;
  let outcome: unknown = null;
  const deadline = Date.now() + 20_000;
  while (outcome === null && Date.now() < deadline) {
    await new Promise((resolve) => setTimeout(resolve, LEASE_MS / 3));
    try {
      // A throttle of 0 units asks nothing of the controller: it only says whether the lease holds.
      await stalled.slots.throttle(0);
    } catch (error) {
      outcome = error;
    }
  }
  assert.ok(isSluiceError(outcome, "LEASE_EXPIRED"), `expected LEASE_EXPIRED, got ${String(outcome)}`);
  assert.match(
    (outcome as SluiceError).message,
    /throttler "slots": the controller no longer counts 2 of the units client "stalled\/0" held — a renewal answered that the controller counts 0/,
  );
  console.log(
    `LEASE_EXPIRED after the controller gave the units to another holder in ${handedOverMs} ms (lease_timeout ${LEASE_MS} ms): ${(outcome as SluiceError).message}`,
  );
  // The other holder is the one counted; the stalled one starts afresh and waits its turn.
  other.slots.release(2);
  await stalled.slots.throttle(1, { signal: AbortSignal.timeout(20_000) });
  stalled.slots.release(1);
});
