import type { Clock } from "@sluice/core";

// Wait time per key over the last minute, for the top keys (docs/design.md §11.4): only keys that waited
// are kept, in two 30-second slots, so a key that stops waiting drops out within a minute and the
// memory is bounded by the keys that waited lately, never by every key.

export const KEY_WAIT_WINDOW_MS = 60_000;
const SLOT_MS = KEY_WAIT_WINDOW_MS / 2;

export class KeyWaits {
  private slot = -1;
  private current = new Map<string, number>();
  private previous = new Map<string, number>();

  constructor(private readonly clock: Clock) {}

  add(key: string, waitedMs: number): void {
    this.rotate();
    this.current.set(key, (this.current.get(key) ?? 0) + waitedMs);
  }

  /** The `count` keys that waited most over the last minute, most first. */
  top(count: number): { key: string; waitedMs: number }[] {
    this.rotate();
    if (count <= 0) return [];
    const totals = new Map(this.previous);
    for (const [key, ms] of this.current) totals.set(key, (totals.get(key) ?? 0) + ms);
    return [...totals]
      .map(([key, waitedMs]) => ({ key, waitedMs }))
      .sort((a, b) => b.waitedMs - a.waitedMs || (a.key < b.key ? -1 : 1))
      .slice(0, count);
  }

  forgetOld(): void {
    this.rotate();
  }

  private rotate(): void {
    const slot = Math.floor(this.clock.now() / SLOT_MS);
    if (slot === this.slot) return;
    this.previous = slot === this.slot + 1 ? this.current : new Map();
    this.current = new Map();
    this.slot = slot;
  }
}
