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
 *
 * The timer is the clock's `setTimer` when it has one (systemClock, ManualClock): no promise and no
 * abort listener per wake-up, and a timer overtaken by a sooner one is simply cleared. A clock with
 * `sleep` alone gets the same behaviour from a sleep and an AbortController per timer.
 */
import type { Clock } from "./clock.ts";

interface Wakeup {
  readonly earliest: number;
  readonly latest: number;
  readonly wake: () => void;
}

/**
 * Timer lateness is remembered over this many wake-ups (about half a second of a busy smooth
 * client's), and its second worst is what a wake-up keeps room for: one stall does not make every
 * later wake-up cautious, two within the last few hundred ms do (a busy machine's lateness has a
 * long tail: docs/internals/measurements.md).
 */
const LATENESS_SAMPLES = 32;

/** Calls `fire` once after `ms`; returns what cancels it. */
type SetTimer = (ms: number, fire: () => void) => () => void;

/** `setTimer` from `sleep` alone (a clock that wraps another, in tests): one AbortController per timer. */
function timerFromSleep(clock: Clock): SetTimer {
  return (ms, fire) => {
    const cancel = new AbortController();
    clock.sleep(ms, cancel.signal).then(
      // A sleep that resolved just before the cancel still calls back: the flag keeps it quiet.
      () => cancel.signal.aborted || fire(),
      () => {
        /* cancelled: a sooner timer replaced this one, or nobody waits any more */
      },
    );
    return () => cancel.abort();
  };
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
  private readonly setTimer: SetTimer;
  /** When the one armed timer fires (+∞: none armed), and what clears it. */
  private armedAt = Number.POSITIVE_INFINITY;
  private cancelArmed: (() => void) | null = null;
  /** When the armed timer was asked to fire (not before it was armed). */
  private firesAt = 0;
  /** The owners due at a wake-up, collected before any is woken (each asks again while woken); reused. */
  private readonly due: Wakeup[] = [];
  /** How late the timer fired, at its last LATENESS_SAMPLES wake-ups (a ring). */
  private readonly lateness = new Float64Array(LATENESS_SAMPLES);
  private latenessAt = 0;
  /** The second worst of them, updated at each wake-up. */
  private lateMs = 0;
  /** The timer's callback, made once rather than per wake-up. */
  private readonly onTimer = (): void => this.fired();

  private constructor(private readonly clock: Clock) {
    this.setTimer = clock.setTimer ? clock.setTimer.bind(clock) : timerFromSleep(clock);
  }

  /**
   * Wakes `owner` once, by calling `wake`, at a time in [earliest, latest] (later only by as much
   * as the clock's timers are late). Replaces what the owner asked for before: its latest state
   * says when it is next due.
   */
  schedule(owner: object, earliest: number, latest: number, wake: () => void): void {
    const span = { earliest, latest: Math.max(earliest, latest), wake };
    this.wanted.set(owner, span);
    if (span.latest < this.armedAt) this.arm(span.latest);
  }

  /** Forgets `owner`'s wake-up; the last owner to leave clears the timer (a closed client). */
  cancel(owner: object): void {
    if (!this.wanted.delete(owner) || this.wanted.size > 0) return;
    this.disarm();
  }

  /** Timers armed and not yet fired (for tests: sharing means at most one, however many owners). */
  get timersArmed(): number {
    return this.cancelArmed ? 1 : 0;
  }

  /**
   * How late this clock's timer fires, nearly at worst: the second worst of its last
   * LATENESS_SAMPLES wake-ups (ms; 0 before any). What a wake-up planned now should keep of its
   * lateness budget for the event loop being busy.
   */
  get recentLatenessMs(): number {
    return this.lateMs;
  }

  /** Owners waiting to be woken. */
  get waiting(): number {
    return this.wanted.size;
  }

  /** Arms the timer for `at`, clearing one armed for later (clearing a timer costs less than its wake-up). */
  private arm(at: number): void {
    this.disarm();
    const now = this.clock.now();
    this.armedAt = at;
    // Lateness is counted from when the timer could fire: a time already past fires at once.
    this.firesAt = Math.max(at, now);
    this.cancelArmed = this.setTimer(this.firesAt - now, this.onTimer);
  }

  private disarm(): void {
    this.cancelArmed?.();
    this.cancelArmed = null;
    this.armedAt = Number.POSITIVE_INFINITY;
  }

  private noteLateness(lateMs: number): void {
    this.lateness[this.latenessAt] = lateMs;
    this.latenessAt = (this.latenessAt + 1) % LATENESS_SAMPLES;
    let worst = 0;
    let second = 0;
    for (const late of this.lateness) {
      if (late > worst) {
        second = worst;
        worst = late;
      } else if (late > second) second = late;
    }
    this.lateMs = second;
  }

  private fired(): void {
    const now = this.clock.now();
    this.noteLateness(Math.max(0, now - this.firesAt));
    this.cancelArmed = null;
    this.armedAt = Number.POSITIVE_INFINITY;
    const due = this.due;
    // Collected first: a woken owner asks again (schedule) and must not be visited twice.
    for (const [owner, wakeup] of this.wanted) {
      if (wakeup.earliest > now) continue;
      due.push(wakeup);
      this.wanted.delete(owner);
    }
    // Every due owner is woken even if one throws; the first error then surfaces from this timer's
    // callback, as it would have from the owner's own timer.
    let failure: { error: unknown } | null = null;
    for (let i = 0; i < due.length; i++) {
      try {
        due[i]?.wake();
      } catch (error) {
        failure ??= { error };
      }
    }
    due.length = 0;
    // The owners woken have asked again meanwhile (schedule armed what they need); the ones still
    // waiting need the timer by their soonest `latest` (a timer fired early by the clock's rounding
    // finds its owner not yet due and comes back for it).
    let soonest = Number.POSITIVE_INFINITY;
    for (const wakeup of this.wanted.values()) if (wakeup.latest < soonest) soonest = wakeup.latest;
    if (soonest < this.armedAt) this.arm(soonest);
    if (failure) throw failure.error;
  }
}
