/** A binary min-heap ordered by `before(a, b)`. O(log n) push and pop, O(1) peek. */
export class MinHeap<T> {
  private readonly items: T[] = [];

  constructor(private readonly before: (a: T, b: T) => boolean) {}

  get size(): number {
    return this.items.length;
  }

  peek(): T | undefined {
    return this.items[0];
  }

  push(item: T): void {
    const items = this.items;
    items.push(item);
    let i = items.length - 1;
    while (i > 0) {
      const parent = (i - 1) >> 1;
      if (!this.before(items[i] as T, items[parent] as T)) break;
      [items[i], items[parent]] = [items[parent] as T, items[i] as T];
      i = parent;
    }
  }

  pop(): T | undefined {
    const items = this.items;
    const top = items[0];
    const last = items.pop();
    if (items.length === 0 || last === undefined) return top;
    items[0] = last;
    this.siftDown(0);
    return top;
  }

  values(): readonly T[] {
    return this.items;
  }

  /** Keeps only the items `keep` accepts (calling `dropped` on the others) and restores heap order in O(n). */
  retain(keep: (item: T) => boolean, dropped?: (item: T) => void): void {
    const items = this.items;
    let kept = 0;
    for (const item of items) {
      if (keep(item)) items[kept++] = item;
      else dropped?.(item);
    }
    items.length = kept;
    for (let i = (kept >> 1) - 1; i >= 0; i--) this.siftDown(i);
  }

  private siftDown(start: number): void {
    const items = this.items;
    let i = start;
    for (;;) {
      const left = 2 * i + 1;
      const right = left + 1;
      let smallest = i;
      if (left < items.length && this.before(items[left] as T, items[smallest] as T)) smallest = left;
      if (right < items.length && this.before(items[right] as T, items[smallest] as T)) smallest = right;
      if (smallest === i) return;
      [items[i], items[smallest]] = [items[smallest] as T, items[i] as T];
      i = smallest;
    }
  }
}
