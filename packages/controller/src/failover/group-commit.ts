/**
 * Coalesces writes of a controller's state: `flush()` resolves once a write that began after the call
 * has been acknowledged. Calls that arrive while a write is under way share the next one, so a busy
 * leader makes one write per round trip to the store, however many grants it answers meanwhile.
 */
export class GroupCommit {
  private waiting: { resolve(): void; reject(error: unknown): void }[] = [];
  private running = false;

  constructor(private readonly write: () => Promise<void>) {}

  flush(): Promise<void> {
    return new Promise<void>((resolve, reject) => {
      this.waiting.push({ resolve, reject });
      if (!this.running) void this.drain();
    });
  }

  private async drain(): Promise<void> {
    this.running = true;
    while (this.waiting.length > 0) {
      const batch = this.waiting;
      this.waiting = [];
      try {
        await this.write();
        for (const waiter of batch) waiter.resolve();
      } catch (error) {
        for (const waiter of batch) waiter.reject(error);
      }
    }
    this.running = false;
  }
}
