import { randomUUID } from "node:crypto";
import type { Admin, Consumer, Kafka } from "kafkajs";
import type { ControllerState, ControllerStateStore, StateWrite } from "@sluice/failover-ports";
import { ControllerStateFold } from "./controller-state-fold.ts";
import {
  bucketKey,
  controllerStateTopic,
  controllerWriterId,
  encodeLeader,
  encodeSpec,
  encodeThrottler,
  keyBucketKey,
  STATE_KEYS,
  stateKeyOf,
} from "./controller-state-records.ts";
import { ensureStateTopic } from "./controller-state-topic.ts";
import { ControllerStateWriter, type StateMessage } from "./controller-state-writer.ts";
import { CONSUMER_RESTART_DEFAULTS } from "./defaults.ts";
import { KafkaIoError, describeError } from "./kafka-io-error.ts";
import { disconnectWithin, RestartingConsumer, withinMs } from "./restarting-consumer.ts";

export interface KafkaControllerStateStoreOptions {
  readonly kafka: Kafka;
  readonly pipeline: string;
  /** Problems worth a log line (malformed records). */
  readonly log?: (line: string) => void;
  /** How long catchUp() waits for the reader to reach the end of the topic. Default 30 s. */
  readonly catchUpTimeoutMs?: number;
}

interface CatchUpWaiter {
  readonly offset: number;
  resolve(): void;
}

/**
 * The controller's state on the compacted one-partition topic `<pipeline>.controller-state`
 * (docs/design.md §5.3). Every controller of the pipeline reads its committed records (read_committed) from
 * the start; the latest record of each key by offset is the state (ControllerStateFold). Only the
 * leader writes, through the pipeline's one transactional writer (ControllerStateWriter), which it
 * claims before it reads. The reader's consumer group is private to this process and commits
 * nothing: the broker forgets it once the process is gone.
 */
export class KafkaControllerStateStore implements ControllerStateStore {
  readonly topic: string;
  private readonly admin: Admin;
  private readonly reader: RestartingConsumer;
  private readonly writer: ControllerStateWriter;
  private readonly fold: ControllerStateFold;
  /** Offset after the last record read, control records (transaction markers) included. */
  private position = 0;
  private waiters: CatchUpWaiter[] = [];
  private starting: Promise<void> | null = null;
  private closing: Promise<void> | null = null;

  constructor(private readonly options: KafkaControllerStateStoreOptions) {
    this.topic = controllerStateTopic(options.pipeline);
    const log = options.log ?? (() => {});
    this.fold = new ControllerStateFold((line) => log(`"${this.topic}": ${line}`));
    this.admin = options.kafka.admin();
    this.writer = new ControllerStateWriter(options.kafka, controllerWriterId(options.pipeline), this.topic);
    this.reader = new RestartingConsumer({
      what: `the reader of "${this.topic}"`,
      create: () => this.createReader(),
      run: (consumer) => this.runReader(consumer),
      log,
    });
  }

  /**
   * A reader in a group of its own, from the first offset: a replacement reads everything again,
   * which the fold ignores where it has a newer record, and moves `position` only past what it had.
   * Every crash gets a replacement, in a new group: kafkajs would restart the same member's group,
   * and a broker that restarted meanwhile keeps the dead member in it, so that join waited out the
   * session timeout (30 s) before the reader read again and a takeover could catch up.
   */
  private createReader(): Consumer {
    const consumer = this.options.kafka.consumer({
      groupId: `${this.options.pipeline}.controller-state-reader.${randomUUID().slice(0, 8)}`,
      allowAutoTopicCreation: false,
      maxWaitTimeInMs: 200,
      readUncommitted: false,
      retry: { restartOnFailure: async () => false },
    });
    // A fetch of transaction markers or aborted records only reaches no eachBatch, but it moves
    // the reader on: the end of every batch counts, so catchUp sees the last stable offset reached.
    consumer.on(consumer.events.END_BATCH_PROCESS, ({ payload }) => this.readUpTo(payload.lastOffset));
    return consumer;
  }

  private async runReader(consumer: Consumer): Promise<void> {
    await consumer.connect();
    await consumer.subscribe({ topic: this.topic, fromBeginning: true });
    await consumer.run({
      autoCommit: false,
      eachBatch: async ({ batch }) => {
        for (const message of batch.messages)
          this.fold.apply(Number(message.offset), message.key?.toString("utf8") ?? null, message.value?.toString("utf8") ?? null);
        this.readUpTo(batch.lastOffset());
      },
    });
  }

  start(): Promise<void> {
    this.starting ??= this.open();
    return this.starting;
  }

  private async open(): Promise<void> {
    try {
      await this.admin.connect();
      await ensureStateTopic(this.admin, this.topic);
      await this.reader.start();
    } catch (error) {
      throw new KafkaIoError(
        "SOURCE_START_FAILED",
        `could not open the controller state topic "${this.topic}" of pipeline "${this.options.pipeline}": ${describeError(error)}`,
        { pipeline: this.options.pipeline, topic: this.topic },
        { cause: error },
      );
    }
  }

  async claimWriter(signal?: AbortSignal): Promise<void> {
    await this.start();
    await this.writer.claim(signal);
  }

  /** Waits until everything committed before the call is read: up to the last stable offset (ListOffsets, read_committed). */
  async catchUp(signal?: AbortSignal): Promise<ControllerState> {
    await this.start();
    const offsets = await this.admin.fetchTopicOffsets(this.topic);
    const end = Number(offsets.find((o) => o.partition === 0)?.high ?? "0");
    if (this.position >= end) return this.fold.state();
    const timeoutMs = this.options.catchUpTimeoutMs ?? 30_000;
    await new Promise<void>((resolve, reject) => {
      const timer = setTimeout(() => {
        this.waiters = this.waiters.filter((w) => w !== waiter);
        reject(
          new KafkaIoError("SOURCE_START_FAILED", `reading "${this.topic}" up to offset ${end} took over ${timeoutMs} ms (read up to ${this.position})`, {
            topic: this.topic,
            end,
            position: this.position,
          }),
        );
      }, timeoutMs);
      const waiter: CatchUpWaiter = {
        offset: end,
        resolve: () => {
          clearTimeout(timer);
          signal?.removeEventListener("abort", onAbort);
          resolve();
        },
      };
      const onAbort = () => {
        clearTimeout(timer);
        this.waiters = this.waiters.filter((w) => w !== waiter);
        reject(new Error(`catching up on "${this.topic}" was cancelled`));
      };
      signal?.addEventListener("abort", onAbort, { once: true });
      this.waiters.push(waiter);
    });
    return this.fold.state();
  }

  latest(): ControllerState {
    return this.fold.state();
  }

  /** One committed transaction; what it wrote is read back like every record (in offset order). */
  async write(records: StateWrite): Promise<void> {
    await this.start();
    const messages: StateMessage[] = [];
    if (records.spec) messages.push({ key: STATE_KEYS.spec, value: encodeSpec(records.spec) });
    for (const record of records.throttlers ?? []) messages.push({ key: stateKeyOf(record), value: encodeThrottler(record) });
    for (const id of records.removedThrottlers ?? []) messages.push({ key: bucketKey(id), value: null });
    for (const { throttlerId, key } of records.removedKeys ?? []) messages.push({ key: keyBucketKey(throttlerId, key), value: null });
    // A record read at a misplaced Kafka key (written before ids were escaped) is deleted there once
    // its own key is written or deleted, so it cannot come back when compaction drops the newer one.
    const written = new Set(messages.map((m) => m.key));
    for (const [kafkaKey, ownKey] of this.fold.misplacedKeys()) {
      if (written.has(ownKey) && !written.has(kafkaKey)) messages.push({ key: kafkaKey, value: null });
    }
    if (records.leader) messages.push({ key: STATE_KEYS.leader, value: encodeLeader(records.leader) });
    if (messages.length === 0) return;
    await this.writer.write(messages);
  }

  close(): Promise<void> {
    this.closing ??= (async () => {
      for (const waiter of this.waiters) waiter.resolve();
      this.waiters = [];
      const log = this.options.log ?? (() => {});
      const timeoutMs = CONSUMER_RESTART_DEFAULTS.disconnectTimeoutMs;
      await Promise.all([
        this.reader.close(),
        withinMs(this.writer.close(), timeoutMs),
        disconnectWithin(this.admin, timeoutMs, `the admin client of "${this.topic}"`, log),
      ]);
    })();
    return this.closing;
  }

  private readUpTo(lastOffset: string): void {
    this.position = Math.max(this.position, Number(lastOffset) + 1);
    this.wakeWaiters();
  }

  private wakeWaiters(): void {
    const ready = this.waiters.filter((w) => this.position >= w.offset);
    if (ready.length === 0) return;
    this.waiters = this.waiters.filter((w) => this.position < w.offset);
    for (const waiter of ready) waiter.resolve();
  }
}
