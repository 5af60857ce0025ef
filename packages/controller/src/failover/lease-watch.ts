import type { Clock } from "@sluice/core";
import type { LeaderLease } from "./leader-lease.ts";

/**
 * A timer for the end of a leader's lease. Without it a lease that lapses between calls would be
 * noticed only by the next call, and the waiters of the lapsed leader would hang until then; with it
 * the leader fences itself (`onLapse`) the moment the lease ends, and they fail promptly.
 */
export class LeaseWatch {
  private watch: AbortController | null = null;

  constructor(
    private readonly lease: LeaderLease,
    private readonly clock: Clock,
    private readonly onLapse: () => void,
  ) {}

  /** (Re)arms the timer for the lease's current end; a renewal found on waking re-arms it further. */
  arm(): void {
    this.watch?.abort();
    const watch = new AbortController();
    this.watch = watch;
    const loop = async () => {
      while (!watch.signal.aborted) {
        const expiresAt = this.lease.expiresAt();
        if (expiresAt === null) return;
        const now = this.clock.now();
        if (now >= expiresAt) {
          this.onLapse();
          return;
        }
        try {
          await this.clock.sleep(Math.ceil(expiresAt - now), watch.signal);
        } catch {
          return;
        }
      }
    };
    void loop();
  }

  disarm(): void {
    this.watch?.abort();
    this.watch = null;
  }
}
