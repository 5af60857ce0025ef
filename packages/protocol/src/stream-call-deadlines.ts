import { MinHeap, systemClock } from "@sluice/core";

interface Due<Call> {
  readonly at: number;
  readonly callId: number;
  readonly call: Call;
  readonly method: string;
}

const earlier = <Call>(a: Due<Call>, b: Due<Call>) => a.at < b.at;

/** Below this many timers a heap is never compacted (a rebuild would cost more than it frees). */
const COMPACT_MIN = 1_024;

/**
 * The deadlines of one stream's open calls, on one timer: a waiting call costs a heap slot rather
 * than a timer of its own. An answered call's deadline is not removed; it is skipped when it comes
 * due (its call is no longer open), and the heap is rebuilt from the open calls when such stale
 * entries outnumber them, so a busy stream of short calls does not pile them up.
 */
export class StreamCallDeadlines<Call> {
  private heap = new MinHeap<Due<Call>>(earlier);
  private timer: NodeJS.Timeout | undefined;
  private timerAt = Infinity;

  constructor(
    /** Whether `call` is still the open call `callId` (the first answer wins). */
    private readonly isOpen: (callId: number, call: Call) => boolean,
    /** Answers the call at its deadline. */
    private readonly expire: (callId: number, call: Call, method: string, at: number) => void,
    /** How many calls are open, to know when stale entries dominate. */
    private readonly openCount: () => number,
  ) {}

  /** Deadlines kept, stale ones included (for tests of the compaction). */
  get size(): number {
    return this.heap.size;
  }

  add(at: number, callId: number, call: Call, method: string): void {
    if (this.heap.size >= COMPACT_MIN && this.heap.size > 4 * this.openCount()) this.compact();
    this.heap.push({ at, callId, call, method });
    if (at < this.timerAt) this.arm(at);
  }

  /** Forgets every deadline (the stream ended). */
  clear(): void {
    if (this.timer !== undefined) clearTimeout(this.timer);
    this.timer = undefined;
    this.timerAt = Infinity;
    this.heap = new MinHeap<Due<Call>>(earlier);
  }

  private arm(at: number): void {
    if (this.timer !== undefined) clearTimeout(this.timer);
    this.timerAt = at;
    this.timer = setTimeout(() => this.fire(), Math.max(0, Math.ceil(at - systemClock.now())));
  }

  private fire(): void {
    this.timer = undefined;
    this.timerAt = Infinity;
    const now = systemClock.now();
    for (let due = this.heap.peek(); due !== undefined && due.at <= now; due = this.heap.peek()) {
      this.heap.pop();
      if (this.isOpen(due.callId, due.call)) this.expire(due.callId, due.call, due.method, due.at);
    }
    const next = this.heap.peek();
    if (next !== undefined) this.arm(next.at);
  }

  private compact(): void {
    const live = this.heap.values().filter((due) => this.isOpen(due.callId, due.call));
    this.heap = new MinHeap<Due<Call>>(earlier);
    for (const due of live) this.heap.push(due);
  }
}
