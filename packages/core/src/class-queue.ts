import type { Entry } from "./quota-entry.ts";
import { MinHeap } from "./min-heap.ts";
import { WaitHistogram } from "./wait-histogram.ts";

/** The waiting requests of one class inside a QuotaBucket, with the class's own figures. */
export interface ClassQueue {
  /** Entries by (lag timestamp, arrival); detached and finished entries are dropped lazily at the head. */
  readonly heap: MinHeap<Entry>;
  pendingRequests: number;
  pendingAmount: number;
  granted: number;
  refunded: number;
  released: number;
  /** Wait until a request's first chunk (the reference's quota_class.wait_time). */
  readonly firstGrantWait: WaitHistogram;
}

export function newClassQueue(): ClassQueue {
  return {
    heap: new MinHeap<Entry>((a, b) => a.timestampMs < b.timestampMs || (a.timestampMs === b.timestampMs && a.seq < b.seq)),
    pendingRequests: 0,
    pendingAmount: 0,
    granted: 0,
    refunded: 0,
    released: 0,
    firstGrantWait: new WaitHistogram(),
  };
}

/** The first entry of a class still waiting, dropping detached and finished ones on the way. */
export function headOf(queue: ClassQueue): Entry | undefined {
  for (let head = queue.heap.peek(); head; head = queue.heap.peek()) {
    if (head.state === "queued") return head;
    queue.heap.pop();
    head.inHeap = false;
  }
  return undefined;
}
