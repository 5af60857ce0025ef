interface JoinWaiter {
  resolve(): void;
  reject(error: Error): void;
}

/**
 * Callers waiting for the consumer's next group join (start(), a commit retried after a
 * rebalance). Each wait ends at the join, at its timeout, at its signal, or when every wait is
 * refused (close, crash); it leaves no timer behind.
 */
export class JoinWaiters {
  private readonly waiters = new Set<JoinWaiter>();

  wait(timeoutMs: number, timeoutError: () => Error, signal?: AbortSignal): Promise<void> {
    return new Promise<void>((resolve, reject) => {
      const finish = (error?: Error) => {
        clearTimeout(timer);
        signal?.removeEventListener("abort", onAbort);
        this.waiters.delete(waiter);
        if (error) reject(error);
        else resolve();
      };
      const waiter: JoinWaiter = { resolve: () => finish(), reject: (error) => finish(error) };
      const onAbort = () => finish(signal?.reason instanceof Error ? signal.reason : new Error("aborted"));
      const timer = setTimeout(() => finish(timeoutError()), timeoutMs);
      this.waiters.add(waiter);
      signal?.addEventListener("abort", onAbort, { once: true });
      if (signal?.aborted) onAbort();
    });
  }

  resolveAll(): void {
    for (const waiter of [...this.waiters]) waiter.resolve();
  }

  rejectAll(error: Error): void {
    for (const waiter of [...this.waiters]) waiter.reject(error);
  }
}
