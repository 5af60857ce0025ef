import { SluiceError } from "@sluice/core";
import type { ReleaseQuotaCall, RequestQuotaCall } from "@sluice/protocol";
import type { ThrottlerSpec } from "@sluice/spec";

/**
 * A concurrency throttler refuses at once what can never pass (seed 002: refuse only that): more
 * units than its limit, or than max_limit when the limit is adaptive. Anything smaller waits.
 */
export function refuseNeverFitting(call: RequestQuotaCall, throttler: ThrottlerSpec): void {
  const ceiling = throttler.adaptive ? throttler.adaptive.max_limit : throttler.limit;
  if (ceiling === null || !Number.isFinite(call.amount) || call.amount <= ceiling) return;
  const what = throttler.adaptive ? `max_limit ${ceiling} of its adaptive limit` : `limit ${ceiling}`;
  throw new SluiceError(
    "INVALID_AMOUNT",
    `throttler ${JSON.stringify(call.throttlerId)} is a concurrency throttler with ${what}: a request for ${call.amount} units ` +
      `at once can never pass; ask for at most ${ceiling} units`,
    { throttlerId: call.throttlerId, amount: call.amount, limit: ceiling },
  );
}

export function checkReleaseAmount(call: ReleaseQuotaCall): void {
  if (typeof call.amount === "number" && Number.isFinite(call.amount) && call.amount >= 0) return;
  throw new SluiceError("INVALID_AMOUNT", `amount must be a finite number >= 0, got ${String(call.amount)} (throttler "${call.throttlerId}")`, {
    throttlerId: call.throttlerId,
    amount: call.amount,
  });
}
