import { SluiceError, type KeyableThrottler, type Throttler } from "@sluice/core";
import { Observable, type OperatorFunction } from "rxjs";

export interface ThrottledOptions<T> {
  /** Units each value costs (default 1 per value); 0 passes at once. */
  readonly cost?: (value: T) => number;
  /**
   * Keyed throttlers (docs/design.md §11.4): the key whose bucket each value draws from (a customer, a
   * model, a host), as `throttler.forKey(key(value))`. Values still leave in order.
   */
  readonly key?: (value: T) => string;
  /**
   * Values held while they wait for quota (default 1000). rxjs has no backpressure of its own, so a
   * faster source would otherwise grow this queue without bound.
   */
  readonly maxBuffered?: number;
  /**
   * What happens to a value arriving with `maxBuffered` values already waiting: "error" (default)
   * fails the stream with QUEUE_FULL, naming the figures; "drop" discards the value and counts it
   * in `onDropped`.
   */
  readonly overflow?: "error" | "drop";
  readonly onDropped?: (value: T) => void;
}

const DEFAULT_MAX_BUFFERED = 1000;

/**
 * The rxjs operator of docs/design.md §14: each value waits for its quota from `throttler`, in order, and
 * is emitted once granted. Unsubscribing aborts the pending wait (so its quota is not taken) and
 * drops what is buffered. The buffer is bounded: past `maxBuffered` the stream fails (or drops, as
 * chosen) instead of holding an unbounded backlog in memory — a backlog that must survive belongs
 * in a durable stream (a Kafka topic), where a pipeline reads it at the throttler's pace.
 */
export function throttled<T>(throttler: Throttler | KeyableThrottler, options: ThrottledOptions<T> = {}): OperatorFunction<T, T> {
  const cost = options.cost ?? (() => 1);
  const keyOf = options.key;
  if (keyOf !== undefined && !("forKey" in throttler)) {
    throw new SluiceError("SPEC_INVALID", "throttled(): a key function needs a throttler handle with forKey (getThrottlerOrThrow or connectThrottlers)", {});
  }
  const throttlerOf = (value: T): Throttler => (keyOf === undefined ? throttler : (throttler as KeyableThrottler).forKey(keyOf(value)));
  const maxBuffered = options.maxBuffered ?? DEFAULT_MAX_BUFFERED;
  if (!Number.isInteger(maxBuffered) || maxBuffered < 1) {
    throw new SluiceError("SPEC_INVALID", `throttled(): maxBuffered must be an integer ≥ 1, got ${String(maxBuffered)}`, { maxBuffered });
  }
  return (source) =>
    new Observable<T>((subscriber) => {
      const buffer: T[] = [];
      const lifetime = new AbortController();
      let waiting = false;
      let sourceDone = false;

      const pump = async (): Promise<void> => {
        if (waiting) return;
        waiting = true;
        try {
          while (buffer.length > 0 && !lifetime.signal.aborted) {
            const value = buffer[0] as T;
            const units = cost(value);
            if (units > 0) await throttlerOf(value).throttle(units, { signal: lifetime.signal });
            if (lifetime.signal.aborted) return;
            buffer.shift();
            subscriber.next(value);
          }
          if (sourceDone && buffer.length === 0) subscriber.complete();
        } catch (error) {
          if (!lifetime.signal.aborted) subscriber.error(error);
        } finally {
          waiting = false;
        }
      };

      const subscription = source.subscribe({
        next(value) {
          if (buffer.length >= maxBuffered) {
            if (options.overflow === "drop") {
              options.onDropped?.(value);
              return;
            }
            subscriber.error(
              new SluiceError(
                "QUEUE_FULL",
                `throttled(): ${buffer.length} values wait for quota (maxBuffered ${maxBuffered}); the source is faster than the throttler — ` +
                  'put the backlog in a durable stream, raise maxBuffered, or choose overflow: "drop"',
                { buffered: buffer.length, maxBuffered },
              ),
            );
            return;
          }
          buffer.push(value);
          void pump();
        },
        error(error: unknown) {
          subscriber.error(error);
        },
        complete() {
          sourceDone = true;
          void pump();
        },
      });

      return () => {
        lifetime.abort(new SluiceError("CANCELLED", "throttled(): unsubscribed"));
        buffer.length = 0;
        subscription.unsubscribe();
      };
    });
}
