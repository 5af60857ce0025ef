import { DEFAULT_CLASS, type ClassScheduler } from "./class-scheduler.ts";
import type { QuotaBucketConfig } from "./quota-bucket-config.ts";
import type { QuotaBucketCounters, QuotaClassSnapshot } from "./quota-bucket-snapshot.ts";
import type { Entry } from "./quota-entry.ts";
import { LagOrderHeap } from "./lag-order-heap.ts";
import { WaitHistogram } from "./wait-histogram.ts";

/** The waiting requests of one class inside a QuotaBucket, with the class's own figures. */
export interface ClassQueue {
  /**
   * Entries by (lag timestamp, arrival), keys held inline (see LagOrderHeap). Entries that stopped waiting (granted, cancelled, detached)
   * are dropped lazily at the head, and by a rebuild once they outnumber the waiting ones.
   */
  readonly heap: LagOrderHeap<Entry>;
  pendingRequests: number;
  pendingAmount: number;
  granted: number;
  refunded: number;
  released: number;
  /** Wait until a request's first chunk (the reference's quota_class.wait_time). */
  readonly firstGrantWait: WaitHistogram;
}

/**
 * Past this many entries that no longer wait (on top of twice the waiting ones), a class's heap is
 * rebuilt: one blocked request and a flood of cancels behind it cannot grow memory, and each rebuild
 * is paid for by the dead entries it drops (amortised O(1) per cancel).
 */
const DEAD_ENTRY_SLACK = 64;

function newClassQueue(): ClassQueue {
  return {
    heap: new LagOrderHeap<Entry>(),
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

/** The class queues of one QuotaBucket, kept in step with its ClassScheduler's active set. */
export class ClassQueues {
  private readonly queues = new Map<string, ClassQueue>();
  /** `default`'s queue, which is never removed: most requests are served in it, found without the map. */
  private defaultQueue: ClassQueue | undefined;

  constructor(private readonly scheduler: ClassScheduler) {}

  /** Makes sure a queue exists for each of these classes. */
  ensure(classIds: Iterable<string>): void {
    for (const id of classIds) this.get(id);
  }

  get(classId: string): ClassQueue {
    if (classId === DEFAULT_CLASS && this.defaultQueue) return this.defaultQueue;
    let queue = this.queues.get(classId);
    if (!queue) {
      queue = newClassQueue();
      this.queues.set(classId, queue);
    }
    if (classId === DEFAULT_CLASS) this.defaultQueue = queue;
    return queue;
  }

  find(classId: string): ClassQueue | undefined {
    return this.queues.get(classId);
  }

  ids(): string[] {
    return [...this.queues.keys()];
  }

  /**
   * The class a request is served in: the one it names if declared and accepting; otherwise
   * `default`, counted as classless (none named while classes are declared) or unknown.
   */
  resolve(requested: string, config: QuotaBucketConfig, counters: QuotaBucketCounters): string {
    if (requested === "") {
      if (hasAny(config.classWeights)) counters.classlessRequests += 1;
      return DEFAULT_CLASS;
    }
    if (requested === DEFAULT_CLASS) return DEFAULT_CLASS;
    if (!this.scheduler.isAccepting(requested)) {
      counters.unknownClassRequests += 1;
      return DEFAULT_CLASS;
    }
    return requested;
  }

  /** Each class the scheduler knows, with its queue's figures at `now`. */
  snapshots(now: number): QuotaClassSnapshot[] {
    return this.scheduler.views().map((view): QuotaClassSnapshot => {
      const queue = this.get(view.id);
      return {
        ...view,
        pendingRequests: queue.pendingRequests,
        pendingAmount: queue.pendingAmount,
        granted: queue.granted,
        refunded: queue.refunded,
        released: queue.released,
        waitTime: queue.firstGrantWait.view(now),
      };
    });
  }

  /** Entries held by all heaps, waiting or not yet dropped: what the queues cost in memory. */
  heldEntries(): number {
    let total = 0;
    for (const queue of this.queues.values()) total += queue.heap.size;
    return total;
  }

  /** Puts a waiting entry in its class's queue (again, after a detach) and counts it as pending. */
  add(entry: Entry): void {
    const queue = this.get(entry.classId);
    if (!entry.inHeap) {
      queue.heap.push(entry);
      entry.inHeap = true;
    }
    queue.pendingRequests += 1;
    queue.pendingAmount += entry.remaining;
    this.refresh(entry.classId);
  }

  /** Tells the scheduler whether a class has a head waiting; a retired class that drained goes away. */
  refresh(classId: string): void {
    const queue = this.queues.get(classId);
    if (!queue) return;
    if (queue.heap.size > 2 * queue.pendingRequests + DEAD_ENTRY_SLACK) {
      queue.heap.retain(
        (entry) => entry.state === "queued",
        (entry) => (entry.inHeap = false),
      );
    }
    const head = headOf(queue);
    if (head) {
      this.scheduler.activate(classId, head.timestampMs);
      return;
    }
    this.scheduler.deactivate(classId);
    if (queue.heap.size === 0 && this.scheduler.removeIfRetired(classId)) this.queues.delete(classId);
  }
}

/** Whether a record has an entry, without Object.keys' array (this runs per request). */
function hasAny(record: Readonly<Record<string, number>>): boolean {
  for (const _ in record) return true;
  return false;
}
