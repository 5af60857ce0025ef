import type { Consumer, ConsumerCrashEvent } from "kafkajs";
import { CONSUMER_RESTART_DEFAULTS } from "./defaults.ts";
import { describeError } from "./kafka-io-error.ts";

export interface RestartingConsumerOptions {
  /** What the consumer is for, as log lines name it: `the election's consumer of group "p.controller"`. */
  readonly what: string;
  /** A fresh consumer with the owner's listeners on it; called once per start, never reused. */
  readonly create: () => Consumer;
  /** Connects, subscribes and runs a consumer that `create` made. */
  readonly run: (consumer: Consumer) => Promise<void>;
  readonly log: (line: string) => void;
  /** The wait before the first new consumer after a death; it doubles while new ones die before joining. */
  readonly initialDelayMs?: number;
  readonly maxDelayMs?: number;
  /** How long close() (and a replacement) waits for kafkajs's disconnect before leaving the consumer behind. */
  readonly disconnectTimeoutMs?: number;
}

/**
 * A kafkajs consumer kept alive for as long as its owner runs. kafkajs starts a crashed consumer
 * again by itself only when the error's root cause is retriable; any other crash leaves it stopped
 * for good, and only its `crash` event (restart: false) says so. A broker that dies or restarts
 * while the consumer looks for its group coordinator gives exactly that: the FindCoordinator request
 * fails on a connection that was open, kafkajs swallows the failure and throws
 * KafkaJSGroupCoordinatorNotFound, which is not retriable. For a consumer whose group membership is
 * the point (the controller election) or whose reading is (the state store's reader), that is a
 * silent, permanent outage. This starts a new consumer instead, after a backoff, again and again
 * until one joins, however long the broker stays away, and logs each death with its cause.
 *
 * A `stop` that no crash report follows (kafkajs failing inside its own crash handling) counts as
 * a death too, once `stopGraceMs` has passed.
 */
export class RestartingConsumer {
  private current: Consumer | null = null;
  /** New consumers started since the last group join: the backoff's exponent. */
  private failures = 0;
  private timer: NodeJS.Timeout | null = null;
  private stopGrace: NodeJS.Timeout | null = null;
  private replacing: Promise<void> | null = null;
  private closed = false;
  private readonly initialDelayMs: number;
  private readonly maxDelayMs: number;
  private readonly disconnectTimeoutMs: number;

  constructor(private readonly options: RestartingConsumerOptions) {
    this.initialDelayMs = options.initialDelayMs ?? CONSUMER_RESTART_DEFAULTS.initialDelayMs;
    this.maxDelayMs = options.maxDelayMs ?? CONSUMER_RESTART_DEFAULTS.maxDelayMs;
    this.disconnectTimeoutMs = options.disconnectTimeoutMs ?? CONSUMER_RESTART_DEFAULTS.disconnectTimeoutMs;
  }

  /** The first consumer; its failure to start is the caller's (nothing is retried before a first start). */
  async start(): Promise<void> {
    await this.options.run(this.attach());
  }

  /** The consumer running now; null between a death and its replacement, and once closed. */
  get consumer(): Consumer | null {
    return this.closed ? null : this.current;
  }

  /** Whether events of `consumer` still matter: false once it was replaced or closed. */
  isCurrent(consumer: Consumer): boolean {
    return !this.closed && this.current === consumer;
  }

  /** Stops restarting and disconnects the consumer, waiting at most `disconnectTimeoutMs` for each step. */
  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    this.clearTimers();
    if (this.replacing) await withinMs(this.replacing, this.disconnectTimeoutMs);
    const consumer = this.current;
    this.current = null;
    if (consumer) await disconnectWithin(consumer, this.disconnectTimeoutMs, `${this.options.what}`, this.options.log);
  }

  private attach(): Consumer {
    const consumer = this.options.create();
    this.current = consumer;
    const { CRASH, STOP, GROUP_JOIN } = consumer.events;
    consumer.on(GROUP_JOIN, () => {
      if (this.isCurrent(consumer)) this.failures = 0;
    });
    consumer.on(CRASH, ({ payload }: ConsumerCrashEvent) => this.onCrash(consumer, payload));
    consumer.on(STOP, () => this.onStop(consumer));
    return consumer;
  }

  private onCrash(consumer: Consumer, { error, restart }: ConsumerCrashEvent["payload"]): void {
    if (!this.isCurrent(consumer)) return;
    this.clearStopGrace();
    // kafkajs logs a crash it restarts from, and the restart itself; only a final one is news.
    if (!restart) this.scheduleReplacement(consumer, `crashed (${describeError(error)}) and kafkajs does not restart it`);
  }

  private onStop(consumer: Consumer): void {
    if (!this.isCurrent(consumer) || this.stopGrace) return;
    // Every crash stops the consumer first and reports itself right after; a stop alone is a death.
    this.stopGrace = setTimeout(() => {
      this.stopGrace = null;
      if (this.isCurrent(consumer)) this.scheduleReplacement(consumer, "stopped and no crash report followed");
    }, CONSUMER_RESTART_DEFAULTS.stopGraceMs);
    this.stopGrace.unref();
  }

  private scheduleReplacement(consumer: Consumer, why: string): void {
    if (!this.isCurrent(consumer) || this.timer) return;
    const delay = Math.min(this.maxDelayMs, this.initialDelayMs * 2 ** Math.min(this.failures, 20));
    this.failures += 1;
    this.options.log(`${this.options.what} ${why}; starting a new consumer in ${delay} ms (attempt ${this.failures} since the last group join)`);
    this.timer = setTimeout(() => {
      this.timer = null;
      this.replacing = this.replace(consumer).finally(() => {
        this.replacing = null;
      });
    }, delay);
  }

  private async replace(dead: Consumer): Promise<void> {
    if (!this.isCurrent(dead)) return;
    this.current = null; // its events are stale from now on
    // kafkajs disconnected it before reporting the crash; this frees whatever it still holds.
    await disconnectWithin(dead, this.disconnectTimeoutMs, `the stopped ${this.options.what}`, this.options.log);
    if (this.closed) return;
    const consumer = this.attach();
    try {
      await this.options.run(consumer);
    } catch (error) {
      this.scheduleReplacement(consumer, `could not start (${describeError(error)})`);
    }
  }

  private clearStopGrace(): void {
    if (this.stopGrace) clearTimeout(this.stopGrace);
    this.stopGrace = null;
  }

  private clearTimers(): void {
    this.clearStopGrace();
    if (this.timer) clearTimeout(this.timer);
    this.timer = null;
  }
}

/**
 * `work` or `timeoutMs`, whichever ends first; never rejects. A kafkajs disconnect waits for the
 * fetch loop and a LeaveGroup, which a broker that is down can hold for a request timeout and more.
 */
export async function withinMs(work: Promise<unknown>, timeoutMs: number): Promise<boolean> {
  let timer: NodeJS.Timeout | undefined;
  const timedOut = new Promise<false>((resolve) => {
    timer = setTimeout(() => resolve(false), timeoutMs);
  });
  try {
    return await Promise.race([
      work.then(
        () => true,
        () => true,
      ),
      timedOut,
    ]);
  } finally {
    clearTimeout(timer);
  }
}

/** Disconnects a kafkajs client, logging a failure, and gives up waiting after `timeoutMs`. */
export async function disconnectWithin(client: { disconnect(): Promise<void> }, timeoutMs: number, what: string, log: (line: string) => void): Promise<void> {
  const disconnecting = client.disconnect().catch((error: unknown) => log(`disconnecting ${what} failed: ${describeError(error)}`));
  if (!(await withinMs(disconnecting, timeoutMs))) log(`${what} did not disconnect within ${timeoutMs} ms; left behind`);
}
