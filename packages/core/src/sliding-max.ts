/**
 * The largest value recorded in a sliding window of time, for a "recent maximum" gauge (the
 * reference's `wait_time.max` is one; an all-time maximum only ever shows the worst moment since
 * start). Values land in fixed slots of `slotMs`, so memory is bounded by `windowMs / slotMs + 1`
 * slots, and the maximum reported covers between `windowMs` and `windowMs + slotMs` of history.
 */
export class SlidingMax {
  /** Oldest first; each start is a multiple of slotMs. */
  private readonly slots: { start: number; max: number }[] = [];

  constructor(
    readonly windowMs: number,
    private readonly slotMs: number,
  ) {}

  record(value: number, now: number): void {
    this.merge(now - (now % this.slotMs), value);
    this.trim(now);
  }

  /** The largest value recorded in the window ending at `now`; 0 when none. */
  max(now: number): number {
    this.trim(now);
    let max = 0;
    for (const slot of this.slots) if (slot.max > max) max = slot.max;
    return max;
  }

  /** Adds everything `other` recorded (same window and slots), e.g. a finished job's into a total. */
  absorb(other: SlidingMax): void {
    for (const slot of other.slots) this.merge(slot.start, slot.max);
  }

  private merge(start: number, value: number): void {
    const last = this.slots[this.slots.length - 1];
    if (!last || last.start < start) {
      this.slots.push({ start, max: value }); // time moved on
      return;
    }
    if (last.start === start) {
      if (value > last.max) last.max = value; // the usual case: the current slot
      return;
    }
    // Same slot, or an older one (a total absorbing another's history): at most windowMs/slotMs + 1 slots to look at.
    const index = this.slots.findIndex((slot) => slot.start >= start);
    const found = this.slots[index];
    if (found && found.start === start) found.max = Math.max(found.max, value);
    else this.slots.splice(index, 0, { start, max: value });
  }

  private trim(now: number): void {
    const oldest = now - this.windowMs;
    if (this.slots.length === 0 || (this.slots[0]?.start ?? 0) + this.slotMs > oldest) return;
    while (this.slots.length > 0 && (this.slots[0]?.start ?? 0) + this.slotMs <= oldest) this.slots.shift();
  }
}
