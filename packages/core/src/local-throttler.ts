import type { QuotaBucketDriver } from "./quota-bucket-driver.ts";
import type { ThrottleOptions, Throttler } from "./throttler.ts";

export interface LocalThrottlerOptions {
  readonly classId?: string;
  readonly clientId?: string;
  /** Lag timestamp of the caller, read when each request is made. */
  readonly priority?: () => number;
}

/** The Throttler interface over an in-process QuotaBucket: same semantics, no network. */
export class LocalThrottler implements Throttler {
  constructor(
    private readonly driver: QuotaBucketDriver,
    private readonly options: LocalThrottlerOptions = {},
  ) {}

  async throttle(amount: number, options: ThrottleOptions = {}): Promise<void> {
    await this.driver.acquire({
      amount,
      classId: this.options.classId ?? "",
      clientId: this.options.clientId ?? "",
      timestampMs: this.options.priority?.() ?? 0,
      onAbort: "cancel",
      ...(options.signal ? { signal: options.signal } : {}),
    });
  }

  tryAcquire(amount: number): boolean {
    return this.driver.tryAcquire(amount, this.options.classId ?? "");
  }

  release(amount: number): void {
    this.driver.release(amount, this.options.classId ?? "");
  }
}
