/**
 * Coalesces the items (calls, answers) produced during one turn of the event loop into one stream
 * message: a worker whose jobs all ask for quota after the same grant sends one frame, and a
 * controller that grants many waiters at once answers them in one. A frame is sent at once when it
 * reaches `maxItems` or about `maxBytes`, so no message nears gRPC's 4 MiB receive limit.
 */
export class FrameBatcher<Item> {
  private items: Item[] = [];
  private bytes = 0;
  private scheduled = false;

  constructor(
    private readonly send: (items: Item[]) => void,
    /** An upper bound of the item's encoded size in bytes (strings counted at 3 bytes a character). */
    private readonly sizeOf: (item: Item) => number,
    private readonly maxItems = 4_096,
    private readonly maxBytes = 1 << 20,
  ) {}

  push(item: Item): void {
    this.items.push(item);
    this.bytes += this.sizeOf(item);
    if (this.items.length >= this.maxItems || this.bytes >= this.maxBytes) {
      this.flush();
      return;
    }
    if (this.scheduled) return;
    this.scheduled = true;
    // setImmediate rather than a microtask: callers woken by one answer frame each resume after a
    // few promise hops, and all of them should make the next frame.
    setImmediate(() => {
      this.scheduled = false;
      this.flush();
    });
  }

  /** Sends what is queued now. */
  flush(): void {
    if (this.items.length === 0) return;
    const items = this.items;
    this.items = [];
    this.bytes = 0;
    this.send(items);
  }

  /** Drops what is queued (the stream it was for has ended). */
  discard(): void {
    this.items = [];
    this.bytes = 0;
  }
}

/** An upper bound of a string's UTF-8 size, cheap enough to run per item. */
export function utf8Bound(text: string): number {
  return text.length * 3;
}
