import { SluiceError, type ThrottleOptions, type Throttler } from "@sluice/core";
import { keyProblem, MAX_KEY_BYTES } from "@sluice/spec";

// `throttler.forKey(key)` (docs/design.md §11.4): a handle on one key's bucket of a keyed throttler. Like the
// throttler's own handle it is stable across reconfiguration: it looks its key's client up at every
// call, so a rebuilt client (an override changed) or a throttler declared again is picked up.

/** Finds the client of one key now; throws a SluiceError when the throttler cannot serve keys now. */
export type KeyClientLookup = (key: string) => Throttler;

export class KeyHandle implements Throttler {
  constructor(
    readonly throttlerId: string,
    readonly key: string,
    private readonly lookup: KeyClientLookup,
  ) {}

  throttle(amount: number, options?: ThrottleOptions): Promise<void> {
    let client: Throttler;
    try {
      client = this.lookup(this.key);
    } catch (error) {
      return Promise.reject(error);
    }
    return client.throttle(amount, options);
  }

  tryAcquire(amount: number): boolean {
    return this.lookup(this.key).tryAcquire(amount);
  }

  release(amount: number): void {
    this.lookup(this.key).release(amount);
  }
}

/** The key a caller passed to forKey, checked as the controller will: 1 to 256 UTF-8 bytes. */
export function checkKey(throttlerId: string, key: unknown): string {
  const problem = typeof key === "string" ? keyProblem(key) : `the key must be a string, got ${typeof key}`;
  if (problem === null) return key as string;
  throw new SluiceError("INVALID_REQUEST", `forKey on throttler ${JSON.stringify(throttlerId)}: ${problem}`, {
    throttlerId,
    ...(typeof key === "string" ? { keyBytes: Buffer.byteLength(key, "utf8") } : {}),
    maxKeyBytes: MAX_KEY_BYTES,
  });
}

/** forKey on a throttler whose spec has no `keyed`: names the throttler and the fix. */
export function notKeyedError(throttlerId: string): SluiceError {
  return new SluiceError(
    "INVALID_REQUEST",
    `forKey: throttler ${JSON.stringify(throttlerId)} is not keyed, so it has no bucket per key; ` +
      `add "keyed": {} to it in dynamic_spec.throttlers (sluice reconfigure), or call it without forKey`,
    { throttlerId },
  );
}
