/**
 * The slots a smooth client holds (docs/design.md §11.1): each answer of the controller is a run of `amount`
 * units, the first at `startAt` and then one every `intervalMs` (on this client's clock, measured
 * from when the answer arrived). Quantities are continuous so that fractional amounts (bytes) pace
 * too: a run has accrued `min(amount, 1 + (t − startAt) / intervalMs)` units at time t ≥ startAt —
 * for whole units exactly "unit i at startAt + i × intervalMs", never earlier.
 *
 * Units nobody takes within `expiryMs` of their slot (less the answer's travel) expire: a unit used
 * later than that would land in a window the controller filled with other clients' slots. A pure
 * value: every method takes `now` in ms.
 */

interface Run {
  readonly startAt: number;
  readonly intervalMs: number;
  readonly amount: number;
  /** The expiry less what the answer's travel may already have used of it. */
  readonly expiryMs: number;
  /** Taken or expired: never handed out again. */
  spent: number;
}

/** Float residue of summed fractional amounts (see prefetching-throttler.ts). */
const TOLERANCE = 1e-9;

export class SlotSchedule {
  private runs: Run[] = [];

  constructor(private readonly expiryMs: number) {}

  /**
   * `travelMs`: how late `startAt` may already be against the controller's plan (the answer's
   * travel, which the client can bound but not know); a unit's whole lateness — travel plus how
   * long it waited here — stays within the expiry. Returns the units lost at once: all of them
   * when the travel alone may exceed the expiry, else 0.
   */
  add(startAt: number, intervalMs: number, amount: number, travelMs = 0): number {
    if (amount <= 0) return 0;
    const expiryMs = this.expiryMs - Math.max(0, travelMs);
    // The answer may have travelled longer than the expiry: even a unit handed out at its slot here
    // could be later than the expiry against the controller's plan, and land in a window the
    // controller filled with other slots. The run is lost as a whole. (Clamped to an expiry of 0
    // instead, a run read 82 ms late at limit 84 handed out units at their slots and put 85 in one
    // closed 1 s window: the property test, one client with stalled answers.)
    if (expiryMs < 0) return amount;
    this.runs.push({ startAt, intervalMs: Math.max(0, intervalMs), amount, expiryMs, spent: 0 });
    this.runs.sort((a, b) => a.startAt - b.startAt);
    return 0;
  }

  /** Units whose slot has come and that were neither taken nor expired. */
  available(now: number): number {
    let sum = 0;
    for (const run of this.runs) sum += Math.max(0, accrued(run, now) - run.spent);
    return sum;
  }

  /** The shortest expiry of the runs held (what their answers' travel left of it); null if none. */
  shortestExpiryMs(): number | null {
    let shortest: number | null = null;
    for (const run of this.runs) shortest = shortest === null ? run.expiryMs : Math.min(shortest, run.expiryMs);
    return shortest;
  }

  /** Units whose slot is still ahead. */
  upcoming(now: number): number {
    let sum = 0;
    for (const run of this.runs) sum += run.amount - Math.max(run.spent, accrued(run, now));
    return Math.max(0, sum);
  }

  /** Drops units whose slot passed more than `expiryMs` ago; returns how many expired. */
  expire(now: number): number {
    let expired = 0;
    for (const run of this.runs) {
      const floor = wholeSlotsBy(run, now - run.expiryMs);
      if (floor > run.spent) {
        expired += floor - run.spent;
        run.spent = floor;
      }
    }
    this.compact();
    return expired;
  }

  /** Takes `amount` available units, oldest slots first. */
  take(amount: number, now: number): void {
    let left = amount;
    for (const run of this.runs) {
      if (left <= 0) break;
      const free = Math.max(0, accrued(run, now) - run.spent);
      const used = Math.min(free, left);
      run.spent += used;
      left -= used;
    }
    this.compact();
  }

  /**
   * The earliest time at which `amount` units are available, or null if the runs held cannot cover
   * it. Runs are counted one after the other, so the answer is never early (overlapping runs would
   * only make it later than needed; the caller re-checks when it wakes).
   */
  timeWhenAvailable(amount: number, now: number): number | null {
    let need = amount - this.available(now);
    if (need <= TOLERANCE * Math.max(1, amount)) return now;
    let at = now;
    for (const run of this.runs) {
      const done = Math.max(run.spent, accrued(run, now));
      const left = run.amount - done;
      if (left <= 0) continue;
      if (need <= left + TOLERANCE) {
        const target = done + need;
        const when = run.intervalMs === 0 || target <= 1 ? run.startAt : run.startAt + (target - 1) * run.intervalMs;
        return Math.max(at, when);
      }
      need -= left;
      at = Math.max(at, run.startAt + (run.amount - 1) * run.intervalMs);
    }
    return null;
  }

  /** Forgets every run (the client closed: its slots are spent, not reissued). */
  clear(): number {
    let dropped = 0;
    for (const run of this.runs) dropped += run.amount - run.spent;
    this.runs = [];
    return dropped;
  }

  private compact(): void {
    if (this.runs.every((run) => run.spent < run.amount - TOLERANCE)) return;
    this.runs = this.runs.filter((run) => run.spent < run.amount - TOLERANCE);
  }
}

/** Units whose slot is at or before `at`, counted in whole slots (a slot expires as a whole). */
function wholeSlotsBy(run: Run, at: number): number {
  if (at < run.startAt) return 0;
  if (run.intervalMs === 0) return run.amount;
  return Math.min(run.amount, Math.floor((at - run.startAt) / run.intervalMs + TOLERANCE) + 1);
}

function accrued(run: Run, at: number): number {
  if (at < run.startAt) return 0;
  if (run.intervalMs === 0) return run.amount;
  return Math.min(run.amount, snapToWhole(1 + (at - run.startAt) / run.intervalMs));
}

/**
 * `(startAt + k × interval − startAt) / interval` comes out as k − 1e-13 as often as k: unsnapped,
 * a caller woken at its slot finds 0.9999999999 of a unit, takes it (within TOLERANCE), and leaves
 * residues that make whole slots expire and refills ask for 1e-9 units. A count within a millionth of
 * a slot of a whole number is that number (a nanosecond early at 1,000 units/s).
 */
function snapToWhole(slots: number): number {
  const whole = Math.round(slots);
  return Math.abs(slots - whole) < 1e-6 ? whole : slots;
}
