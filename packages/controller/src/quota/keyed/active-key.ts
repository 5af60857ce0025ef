import { QuotaBucketDriver, type Clock, type GrantMemory, type QuotaBucketConfig } from "@sluice/core";

/**
 * A key's bucket, with what the keyed throttler keeps of the key beside it: one object per active
 * key, not a record and a driver (a grant touches every object of its key, and with thousands of
 * keys none of them is in cache).
 */
export class ActiveKey extends QuotaBucketDriver {
  /** A number from the start (see TokenBucket's fields): written at every request of the key. */
  lastRequestAt = 0;
  /** Acquires not answered yet: a key is never parked or forgotten under a caller. */
  inFlight = 0;
  /** Units granted less units given back, when the template's adaptive loop last measured the use. */
  measuredNet = 0;

  constructor(id: string, config: QuotaBucketConfig, clock: Clock, grants: GrantMemory, now: number) {
    super(id, config, clock, grants);
    this.lastRequestAt = now;
  }
}
