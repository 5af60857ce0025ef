/** What a LagOrderHeap orders by; both keys are fixed while the item is in the heap. */
export interface LagOrdered {
  readonly timestampMs: number;
  readonly seq: number;
}

/**
 * A binary min-heap by (lag timestamp, arrival seq), for a class's waiting requests (docs/design.md §9.3).
 * The same order as a MinHeap with that comparator, but the two keys of every slot are kept in
 * typed arrays beside the items: sifting compares numbers in two contiguous arrays instead of
 * reading two fields of every entry it passes. With 100,000 requests queued, those reads (a cache
 * miss each on objects spread over the heap) were most of what a grant's cost grew by
 * (bench/README.md, "scheduler cost growth"). Moves are made with a hole, not by swapping.
 */
export class LagOrderHeap<T extends LagOrdered> {
  private readonly items: T[] = [];
  private stamps = new Float64Array(16);
  private seqs = new Float64Array(16);

  get size(): number {
    return this.items.length;
  }

  peek(): T | undefined {
    return this.items[0];
  }

  push(item: T): void {
    const items = this.items;
    let i = items.length;
    items.push(item);
    if (i >= this.stamps.length) this.grow();
    const stamps = this.stamps;
    const seqs = this.seqs;
    const stamp = item.timestampMs;
    const seq = item.seq;
    while (i > 0) {
      const parent = (i - 1) >> 1;
      const parentStamp = stamps[parent] as number;
      if (!(stamp < parentStamp || (stamp === parentStamp && seq < (seqs[parent] as number)))) break;
      items[i] = items[parent] as T;
      stamps[i] = parentStamp;
      seqs[i] = seqs[parent] as number;
      i = parent;
    }
    items[i] = item;
    stamps[i] = stamp;
    seqs[i] = seq;
  }

  pop(): T | undefined {
    const items = this.items;
    const top = items[0];
    const last = items.pop();
    if (items.length === 0 || last === undefined) return top;
    const end = items.length;
    this.siftDown(0, last, this.stamps[end] as number, this.seqs[end] as number);
    return top;
  }

  /** Keeps only the items `keep` accepts (calling `dropped` on the others) and restores heap order in O(n). */
  retain(keep: (item: T) => boolean, dropped?: (item: T) => void): void {
    const items = this.items;
    const stamps = this.stamps;
    const seqs = this.seqs;
    let kept = 0;
    for (let i = 0; i < items.length; i++) {
      const item = items[i] as T;
      if (keep(item)) {
        items[kept] = item;
        stamps[kept] = stamps[i] as number;
        seqs[kept] = seqs[i] as number;
        kept += 1;
      } else {
        dropped?.(item);
      }
    }
    items.length = kept;
    // A queue that drained after a flood gives the key arrays back.
    if (stamps.length > 64 && kept * 4 < stamps.length) this.resize(Math.max(16, kept * 2));
    for (let i = (kept >> 1) - 1; i >= 0; i--) this.siftDown(i, items[i] as T, this.stamps[i] as number, this.seqs[i] as number);
  }

  /** Places `item` (keys `stamp`, `seq`) at the hole `i` or below it. */
  private siftDown(start: number, item: T, stamp: number, seq: number): void {
    const items = this.items;
    const stamps = this.stamps;
    const seqs = this.seqs;
    const count = items.length;
    const half = count >> 1;
    let i = start;
    while (i < half) {
      let child = 2 * i + 1;
      let childStamp = stamps[child] as number;
      let childSeq = seqs[child] as number;
      const right = child + 1;
      if (right < count) {
        const rightStamp = stamps[right] as number;
        const rightSeq = seqs[right] as number;
        if (rightStamp < childStamp || (rightStamp === childStamp && rightSeq < childSeq)) {
          child = right;
          childStamp = rightStamp;
          childSeq = rightSeq;
        }
      }
      if (!(childStamp < stamp || (childStamp === stamp && childSeq < seq))) break;
      items[i] = items[child] as T;
      stamps[i] = childStamp;
      seqs[i] = childSeq;
      i = child;
    }
    items[i] = item;
    stamps[i] = stamp;
    seqs[i] = seq;
  }

  private grow(): void {
    this.resize(this.stamps.length * 2);
  }

  private resize(capacity: number): void {
    const count = this.items.length;
    const stamps = new Float64Array(capacity);
    stamps.set(this.stamps.subarray(0, count));
    this.stamps = stamps;
    const seqs = new Float64Array(capacity);
    seqs.set(this.seqs.subarray(0, count));
    this.seqs = seqs;
  }
}
