import type { Entry } from "./quota-entry.ts";
import { MinHeap } from "./min-heap.ts";

/** A deadline ends a request's wait; a grace ends a detached request's claim to its place. */
export interface Timer {
  readonly at: number;
  readonly id: string;
  readonly kind: "deadline" | "grace";
}

function timerBefore(a: Timer, b: Timer): boolean {
  return a.at < b.at;
}

/**
 * The deadline and grace timers of a QuotaBucket, earliest first. A timer is never removed when its
 * entry changes: it is checked against the entry when it fires (stale ones are skipped), and the heap
 * is rebuilt when stale timers pile up.
 */
export class DeadlineTimers {
  private heap = new MinHeap<Timer>(timerBefore);

  get size(): number {
    return this.heap.size;
  }

  /** When the earliest timer is due, or null when there is none. */
  nextAt(): number | null {
    return this.heap.peek()?.at ?? null;
  }

  armDeadline(entry: Entry): void {
    if (entry.deadlineAt !== null) this.heap.push({ at: entry.deadlineAt, id: entry.id, kind: "deadline" });
  }

  armGrace(entry: Entry, at: number): void {
    this.heap.push({ at, id: entry.id, kind: "grace" });
  }

  /** Takes out the earliest timer if it is due at `now`. */
  popDue(now: number): Timer | undefined {
    const timer = this.heap.peek();
    if (!timer || timer.at > now) return undefined;
    this.heap.pop();
    return timer;
  }

  /**
   * Timers of requests that were granted early stay in the heap until their time; rebuild it when
   * they outnumber the live ones, so memory follows the queue and not the request rate.
   */
  compact(entries: ReadonlyMap<string, Entry>): void {
    if (this.heap.size <= 2 * entries.size + 1024) return;
    const live = new MinHeap<Timer>(timerBefore);
    for (const timer of this.heap.values()) {
      const entry = entries.get(timer.id);
      if (!entry) continue;
      const valid = timer.kind === "deadline" ? entry.deadlineAt === timer.at : entry.detachedUntil === timer.at;
      if (valid) live.push(timer);
    }
    this.heap = live;
  }
}
