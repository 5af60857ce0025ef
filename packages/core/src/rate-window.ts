/**
 * Observed rate of a counter over a sliding window (units per second), for "current granted rate"
 * on dashboards. Keeps one slot per `slotMs`, so memory is bounded by `windowMs / slotMs`.
 */
export class RateWindow {
  private readonly slots: { start: number; amount: number }[] = [];

  constructor(
    private readonly windowMs = 5000,
    private readonly slotMs = 250,
  ) {}

  add(amount: number, now: number): void {
    const start = now - (now % this.slotMs);
    const last = this.slots[this.slots.length - 1];
    if (last && last.start === start) last.amount += amount;
    else this.slots.push({ start, amount });
    this.trim(now);
  }

  /** Units per second over the window ending at `now`. */
  rate(now: number): number {
    this.trim(now);
    const total = this.slots.reduce((sum, slot) => sum + slot.amount, 0);
    return (total * 1000) / this.windowMs;
  }

  private trim(now: number): void {
    const oldest = now - this.windowMs;
    while (this.slots.length > 0 && (this.slots[0]?.start ?? 0) + this.slotMs <= oldest) this.slots.shift();
  }
}
