import type { Clock } from "./clock.ts";

interface Timer {
  at: number;
  seq: number;
  resolve: () => void;
}

/** Lets every pending microtask and I/O callback run, so chained awaits settle between timers. */
const settle = () => new Promise<void>((resolve) => setImmediate(resolve));

/**
 * A clock that moves only when told to. Sleepers wake in time order as `advance` passes their
 * deadline, and everything they schedule runs before the next one wakes — so a test can drive a
 * whole async state machine through minutes of virtual time without sleeping.
 */
export class ManualClock implements Clock {
  private current: number;
  private timers: Timer[] = [];
  private seq = 0;

  constructor(startMs = 0) {
    this.current = startMs;
  }

  now(): number {
    return this.current;
  }

  sleep(ms: number, signal?: AbortSignal): Promise<void> {
    return new Promise<void>((resolve, reject) => {
      if (signal?.aborted) {
        reject(signal.reason);
        return;
      }
      const timer: Timer = {
        at: this.current + Math.max(0, ms),
        seq: this.seq++,
        resolve: () => {
          signal?.removeEventListener("abort", onAbort);
          resolve();
        },
      };
      const onAbort = () => {
        this.timers = this.timers.filter((t) => t !== timer);
        reject(signal?.reason);
      };
      signal?.addEventListener("abort", onAbort, { once: true });
      this.timers.push(timer);
    });
  }

  /** Like `sleep` without a promise: `fire` runs when `advance` passes `ms` from now, unless cancelled first. */
  setTimer(ms: number, fire: () => void): () => void {
    const timer: Timer = { at: this.current + Math.max(0, ms), seq: this.seq++, resolve: fire };
    this.timers.push(timer);
    return () => {
      this.timers = this.timers.filter((t) => t !== timer);
    };
  }

  /** Number of sleepers not yet woken. */
  get pendingTimers(): number {
    return this.timers.length;
  }

  /** Moves time forward by `ms`, waking sleepers in order and letting each one's work run. */
  async advance(ms: number): Promise<void> {
    await this.advanceTo(this.current + ms);
  }

  async advanceTo(targetMs: number): Promise<void> {
    await settle();
    for (;;) {
      const next = this.earliest();
      if (next === undefined || next.at > targetMs) break;
      this.timers = this.timers.filter((t) => t !== next);
      this.current = Math.max(this.current, next.at);
      next.resolve();
      await settle();
    }
    this.current = Math.max(this.current, targetMs);
    await settle();
  }

  /** Advances in steps of `stepMs` until `done()` holds or `limitMs` of virtual time passed. */
  async advanceUntil(done: () => boolean, stepMs: number, limitMs: number): Promise<boolean> {
    const end = this.current + limitMs;
    while (!done()) {
      if (this.current >= end) return false;
      await this.advanceTo(Math.min(end, this.current + stepMs));
    }
    return true;
  }

  private earliest(): Timer | undefined {
    let best: Timer | undefined;
    for (const t of this.timers) {
      if (best === undefined || t.at < best.at || (t.at === best.at && t.seq < best.seq)) best = t;
    }
    return best;
  }
}
