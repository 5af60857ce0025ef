/**
 * A smooth client's own check of what it let out (docs/design.md §11.1): at most `units` units whose calls
 * may have *left* this process within any closed window of `spanMs` (the throttler's period plus its
 * dispatch guard). The controller's slots keep every client's units apart, and a client hands each
 * out within the slot expiry; what neither sees is a process that stalls right after handing a
 * unit out (a major GC, a loaded machine not scheduling it): the caller's call then leaves tens of
 * milliseconds late, while the units after it leave on time, and a protected system that counts
 * arrivals sees `limit × period + 1` in one window. So each hand-out is recorded with when the turn
 * of the event loop that handed it out ended (Clock.afterTurn: a caller that calls at once has
 * sent its call by then), and a unit is held back — up to its expiry, then lost — while handing it
 * out would put more than `units` such departures in one window. The clients of one throttler in
 * one process share a window (sharedDispatchWindow): their calls reach the same system.
 *
 * It binds only after a stall (or a unit handed out late) of more than the tolerance left of the
 * window by the paced rate: a backlogged client alone at 96 % of the limit has 31 ms of room per
 * second at a period of 1 s before it does. It sees this client's units only: the slots of other
 * clients are the controller's to keep apart. A pure value: every method takes `now`.
 */

interface Departure {
  /** When the call may have left at the latest; moved later once the turn that handed it out ends. */
  at: number;
  readonly amount: number;
}

/** Float residue of summed fractional amounts (see prefetching-throttler.ts). */
const TOLERANCE = 1e-9;

export class DispatchWindow {
  /** Oldest first; `head` is the first still counted (a queue without shifting the array). */
  private departures: Departure[] = [];
  private head = 0;
  private counted = 0;

  constructor(
    readonly units: number,
    readonly spanMs: number,
  ) {}

  /** Whether `amount` more units may leave at `now`. */
  admits(amount: number, now: number): boolean {
    this.forget(now);
    // An empty window admits any amount: below one unit per window (limit 0.5/s) a unit never fits,
    // and the controller's slots already keep such units a period apart.
    return this.counted <= TOLERANCE || this.counted + amount <= this.units + TOLERANCE * Math.max(1, this.units);
  }

  /** The earliest time at which `amount` more may leave (now, if they may now). */
  whenAdmits(amount: number, now: number): number {
    if (this.admits(amount, now)) return now;
    let excess = this.counted + amount - this.units;
    let last = now;
    for (let i = this.head; i < this.departures.length; i++) {
      const departure = this.departures[i] as Departure;
      excess -= departure.amount;
      // Counted while inside the closed window [t − span, t]: gone just after `at + span`.
      last = Math.max(now, departure.at + this.spanMs + 1e-3);
      if (excess <= TOLERANCE * Math.max(1, this.units)) return last;
    }
    // More than a window holds: admitted once the window is empty (admits).
    return last;
  }

  /** Whether nothing that left is still counted at `now`: a new window would be the same. */
  isEmpty(now: number): boolean {
    this.forget(now);
    return this.counted <= TOLERANCE;
  }

  /** Records `amount` units handed out at `now`; the returned record's `at` may be moved later. */
  record(amount: number, now: number): Departure {
    const departure = { at: now, amount };
    this.departures.push(departure);
    this.counted += amount;
    return departure;
  }

  /**
   * Drops what left before the window (oldest first: a record moved later by its turn's end only
   * stays counted longer, which holds units back, never lets one out early).
   */
  private forget(now: number): void {
    const from = now - this.spanMs;
    while (this.head < this.departures.length && (this.departures[this.head] as Departure).at < from) {
      this.counted -= (this.departures[this.head] as Departure).amount;
      this.head += 1;
    }
    if (this.head > 64 && this.head * 2 > this.departures.length) {
      this.departures = this.departures.slice(this.head);
      this.head = 0;
    }
    if (this.head === this.departures.length) this.counted = 0;
  }
}

const byClock = new WeakMap<object, Map<string, DispatchWindow>>();

/**
 * The window of throttler `name` for every client on `clock` (a process has one systemClock): the
 * jobs of a process each have their own client of a throttler, and what reaches the protected
 * system is their calls together. A window asked for with other figures (a new limit or period)
 * replaces the one held.
 */
export function sharedDispatchWindow(clock: object, name: string, units: number, spanMs: number): DispatchWindow {
  let windows = byClock.get(clock);
  if (!windows) {
    windows = new Map();
    byClock.set(clock, windows);
  }
  const held = windows.get(name);
  if (held && held.units === units && held.spanMs === spanMs) {
    users.set(held, (users.get(held) ?? 0) + 1);
    return held;
  }
  const window = new DispatchWindow(units, spanMs);
  windows.set(name, window);
  users.set(window, 1);
  return window;
}

/** Clients using each shared window. */
const users = new WeakMap<DispatchWindow, number>();

/**
 * A client of `name` no longer uses `window` (it closed). Once no client does and nothing in it
 * counts any more, it is forgotten: a keyed throttler's keys each have a window, and a process that
 * used 100,000 keys once must not keep 100,000 windows. One still counting departures is kept, so
 * a client made again soon after (a job restarted) sees them.
 */
export function releaseSharedDispatchWindow(clock: object, name: string, window: DispatchWindow, now: number): void {
  const left = Math.max(0, (users.get(window) ?? 1) - 1);
  users.set(window, left);
  const windows = byClock.get(clock);
  if (left === 0 && windows?.get(name) === window && window.isEmpty(now)) windows.delete(name);
}

/** How many shared windows `clock` holds (for tests of the bound). */
export function sharedDispatchWindowCount(clock: object): number {
  return byClock.get(clock)?.size ?? 0;
}
