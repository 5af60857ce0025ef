import type { Throttler } from "@sluice/core";
import { LinkedAbort } from "./linked-abort.ts";

/**
 * Waits for every throttler at once. If one fails, the others stop waiting (their local requests
 * leave the queue) and what they were already granted goes back, so no quota is held by an
 * iteration that will not run, and the retried iteration does not queue behind its own orphans.
 */
export async function acquireTogether(asks: readonly (readonly [Throttler, number])[], signal: AbortSignal): Promise<void> {
  if (asks.length === 1) {
    const [only] = asks;
    if (only) await only[0].throttle(only[1], { signal });
    return;
  }
  const giveUp = new LinkedAbort([signal]);
  const granted: (readonly [Throttler, number])[] = [];
  const waits = asks.map(async (ask) => {
    await ask[0].throttle(ask[1], { signal: giveUp.signal });
    granted.push(ask);
  });
  try {
    await Promise.all(waits);
  } catch (error) {
    giveUp.abort(error);
    await Promise.allSettled(waits);
    for (const [throttler, amount] of granted) throttler.release(amount);
    throw error;
  } finally {
    giveUp.dispose();
  }
}
