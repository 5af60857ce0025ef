/**
 * docs/design.md §9.1's arrival rule for a QuotaBucket, as the reference's fast and slow lanes do it: a
 * request that found nobody waiting is granted in the instant it arrived only at a positive balance;
 * otherwise it waits like any queued request and is granted as soon as the balance is non-negative —
 * but not in that instant. Kept apart because it touches admission, draining and wake-ups alike.
 */
import type { Entry } from "./quota-entry.ts";
import type { UnitSource } from "./unit-source.ts";

/** A request that arrived at a balance of exactly 0 waits this long: the driver's timer step. */
const ARRIVAL_STEP_MS = 1;

export class EmptyQueueArrival {
  /**
   * The request that arrived to an empty queue, while it has not had its first chunk (there is at
   * most one: any later arrival found it waiting). It is granted at once only at a positive balance.
   */
  private waiting: Entry | null = null;

  /** Notes a newly queued entry; only one that found nobody waiting is subject to the rule. */
  arrived(entry: Entry): void {
    if (entry.needsPositiveBalance) this.waiting = entry;
  }

  mayGrant(entry: Entry, tokens: UnitSource, now: number): boolean {
    return now > entry.enqueuedAt || tokens.canGrantWithoutQueue(now);
  }

  /** The entry had its first chunk or left the queue: the rule no longer applies to it. */
  clear(entry: Entry): void {
    entry.needsPositiveBalance = false;
    if (this.waiting === entry) this.waiting = null;
  }

  /** `ms` until a grant is possible, stretched past the arrival instant while the rule holds it back. */
  wakeDelay(ms: number, tokens: UnitSource, now: number): number {
    const first = this.waiting;
    if (first && !this.mayGrant(first, tokens, now)) return Math.max(ms, first.enqueuedAt + ARRIVAL_STEP_MS - now);
    return ms;
  }
}
