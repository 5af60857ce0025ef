/**
 * One timer for every paced client on a clock (a process has one `systemClock`; a test its own
 * ManualClock). An event-loop wake-up costs about 0.1 ms of CPU on a shared 2-core VM whatever it
 * then does, and that is most of what a smooth client costs: four clients in one process that each
 * arm their own timer wake four times as often as one. Each owner instead asks to be woken once
 * within a span — no sooner than `earliest` (before it nothing is due, so a wake-up would only find
 * nothing to hand out) and no later than `latest` (what its lateness budget allows) — and the one
 * timer fires at the soonest `latest` and wakes every owner whose `earliest` has come.
 *
 * An owner is never woken before its `earliest`, and never later than its `latest` plus the timer's
 * own lateness, so sharing a wake-up moves no slot earlier and none later than a timer of its own
 * would; it only lets owners that are due anyway ride along on a wake-up already paid for.
 */
import type { Clock } from "./clock.ts";

interface Wakeup {
  readonly earliest: number;
  readonly latest: number;
  readonly wake: () => void;
}

const byClock = new WeakMap<Clock, SharedWakeups>();

export class SharedWakeups {
  /** The wake-ups of every owner on `clock`; made on first use, dropped with the clock. */
  static of(clock: Clock): SharedWakeups {
    let shared = byClock.get(clock);
    if (!shared) {
      shared = new SharedWakeups(clock);
      byClock.set(clock, shared);
    }
    return shared;
  }

  private readonly wanted = new Map<object, Wakeup>();
  /**
   * When the timers armed and not yet fired are due. A timer that a sooner one overtook is left to
   * fire (it then wakes whoever is due by then): aborting one costs more than its wake-up would.
   */
  private armed: number[] = [];
  /** Clears the armed timers once no owner waits, so that nothing holds the process open. */
  private disarm = new AbortController();

  private constructor(private readonly clock: Clock) {}

  /**
   * Wakes `owner` once, by calling `wake`, at a time in [earliest, latest] (later only by as much
   * as the clock's timers are late). Replaces what the owner asked for before: its latest state
   * says when it is next due.
   */
  schedule(owner: object, earliest: number, latest: number, wake: () => void): void {
    const span = { earliest, latest: Math.max(earliest, latest), wake };
    this.wanted.set(owner, span);
    if (!this.armed.some((at) => at <= span.latest)) this.arm(span.latest);
  }

  /** Forgets `owner`'s wake-up; the last owner to leave clears the timers (a closed client). */
  cancel(owner: object): void {
    if (!this.wanted.delete(owner) || this.wanted.size > 0 || this.armed.length === 0) return;
    this.disarm.abort();
    this.disarm = new AbortController();
    this.armed = [];
  }

  /** Timers armed and not yet fired (for tests: sharing means one, however many owners). */
  get timersArmed(): number {
    return this.armed.length;
  }

  /** Owners waiting to be woken. */
  get waiting(): number {
    return this.wanted.size;
  }

  private arm(at: number): void {
    this.armed.push(at);
    const { signal } = this.disarm;
    this.clock.sleep(Math.max(0, at - this.clock.now()), signal).then(
      () => this.fired(at),
      () => {
        /* disarmed: no owner waits any more */
      },
    );
  }

  private fired(at: number): void {
    const index = this.armed.indexOf(at);
    if (index >= 0) this.armed.splice(index, 1);
    const now = this.clock.now();
    const due: Wakeup[] = [];
    for (const [owner, wakeup] of this.wanted) {
      if (wakeup.earliest > now) continue;
      due.push(wakeup);
      this.wanted.delete(owner);
    }
    // Every due owner is woken even if one throws; the first error then surfaces as a rejection of
    // this timer's callback, as it would have from the owner's own timer.
    let failure: { error: unknown } | null = null;
    for (const wakeup of due) {
      try {
        wakeup.wake();
      } catch (error) {
        failure ??= { error };
      }
    }
    // The owners woken have asked again meanwhile (schedule arms what they need); the ones still
    // waiting need a timer by their soonest `latest`, which may have been the one that just fired.
    let soonest = Number.POSITIVE_INFINITY;
    for (const wakeup of this.wanted.values()) soonest = Math.min(soonest, wakeup.latest);
    if (soonest !== Number.POSITIVE_INFINITY && !this.armed.some((armedAt) => armedAt <= soonest)) this.arm(soonest);
    if (failure) throw failure.error;
  }
}
