import { randomUUID } from "node:crypto";
import type { Admin, Consumer, Kafka, Producer } from "kafkajs";
import {
  EMPTY_CONTROLLER_STATE,
  newerRecord,
  type ControllerState,
  type ControllerStateStore,
  type LeaderRecord,
  type PersistedBuckets,
  type PersistedSpec,
} from "@sluice/controller";
import { brokerReplicationFactor } from "./ensure-topics.ts";
import { KafkaIoError, describeError } from "./kafka-io-error.ts";
import { STATE_KEYS, controllerStateTopic, decodeStateRecord, encodeBuckets, encodeLeader, encodeSpec } from "./controller-state-records.ts";

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
 * (DESIGN §7.4). Every controller of the pipeline reads it from the start and keeps the latest
 * record of each key (followers learn the leader from it); the leader writes with acks from all
 * in-sync replicas. The reader's consumer group is private to this process and commits nothing:
 * the broker forgets it once the process is gone.
 */
export class KafkaControllerStateStore implements ControllerStateStore {
  readonly topic: string;
  private readonly admin: Admin;
  private readonly producer: Producer;
  private readonly reader: Consumer;
  private readonly log: (line: string) => void;
  private state: ControllerState = EMPTY_CONTROLLER_STATE;
  /** Offset of the next record to read. */
  private position = 0;
  private waiters: CatchUpWaiter[] = [];
  private starting: Promise<void> | null = null;
  private closing: Promise<void> | null = null;

  constructor(private readonly options: KafkaControllerStateStoreOptions) {
    this.topic = controllerStateTopic(options.pipeline);
    this.log = options.log ?? (() => {});
    this.admin = options.kafka.admin();
    this.producer = options.kafka.producer({ allowAutoTopicCreation: false });
    this.reader = options.kafka.consumer({
      groupId: `${options.pipeline}.controller-state-reader.${randomUUID().slice(0, 8)}`,
      allowAutoTopicCreation: false,
      maxWaitTimeInMs: 200,
    });
  }

  start(): Promise<void> {
    this.starting ??= this.open();
    return this.starting;
  }

  private async open(): Promise<void> {
    try {
      await this.admin.connect();
      await this.ensureTopic();
      await this.producer.connect();
      await this.reader.connect();
      await this.reader.subscribe({ topic: this.topic, fromBeginning: true });
      await this.reader.run({
        autoCommit: false,
        eachMessage: async ({ message }) => {
          this.apply(message.key?.toString("utf8") ?? null, message.value?.toString("utf8") ?? null);
          this.position = Math.max(this.position, Number(message.offset) + 1);
          this.wakeWaiters();
        },
      });
    } catch (error) {
      throw new KafkaIoError(
        "SOURCE_START_FAILED",
        `could not open the controller state topic "${this.topic}" of pipeline "${this.options.pipeline}": ${describeError(error)}`,
        { pipeline: this.options.pipeline, topic: this.topic },
        { cause: error },
      );
    }
  }

  /** One partition (one order for every record), compacted (the latest of each key is all that matters). */
  private async ensureTopic(): Promise<void> {
    const present = new Set(await this.admin.listTopics());
    if (present.has(this.topic)) return;
    const replicationFactor = await brokerReplicationFactor(this.admin);
    await this.admin.createTopics({
      topics: [{ topic: this.topic, numPartitions: 1, replicationFactor, configEntries: [{ name: "cleanup.policy", value: "compact" }] }],
      waitForLeaders: true,
    });
  }

  async catchUp(signal?: AbortSignal): Promise<ControllerState> {
    await this.start();
    const offsets = await this.admin.fetchTopicOffsets(this.topic);
    const end = Number(offsets.find((o) => o.partition === 0)?.high ?? "0");
    if (this.position >= end) return this.state;
    const timeoutMs = this.options.catchUpTimeoutMs ?? 30_000;
    await new Promise<void>((resolve, reject) => {
      const timer = setTimeout(() => {
        this.waiters = this.waiters.filter((w) => w !== waiter);
        reject(
          new KafkaIoError(
            "SOURCE_START_FAILED",
            `reading "${this.topic}" up to offset ${end} took over ${timeoutMs} ms (read up to ${this.position})`,
            { topic: this.topic, end, position: this.position },
          ),
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
    return this.state;
  }

  latest(): ControllerState {
    return this.state;
  }

  async saveBuckets(record: PersistedBuckets): Promise<void> {
    await this.send(STATE_KEYS.buckets, encodeBuckets(record));
    this.state = { ...this.state, buckets: newerRecord(this.state.buckets, record) };
  }

  async saveSpec(record: PersistedSpec): Promise<void> {
    await this.send(STATE_KEYS.spec, encodeSpec(record));
    this.state = { ...this.state, spec: newerRecord(this.state.spec, record) };
  }

  async saveLeader(record: LeaderRecord): Promise<void> {
    await this.send(STATE_KEYS.leader, encodeLeader(record));
    this.state = { ...this.state, leader: newerRecord(this.state.leader, record) };
  }

  close(): Promise<void> {
    this.closing ??= (async () => {
      for (const waiter of this.waiters) waiter.resolve();
      this.waiters = [];
      await Promise.allSettled([this.reader.disconnect(), this.producer.disconnect(), this.admin.disconnect()]);
    })();
    return this.closing;
  }

  private async send(key: string, value: string): Promise<void> {
    await this.start();
    try {
      await this.producer.send({ topic: this.topic, acks: -1, messages: [{ key, value }] });
    } catch (error) {
      throw new KafkaIoError("SEND_FAILED", `writing "${key}" to "${this.topic}" failed: ${describeError(error)}`, { topic: this.topic, key }, { cause: error });
    }
  }

  private apply(key: string | null, value: string | null): void {
    const decoded = decodeStateRecord(key, value);
    switch (decoded.kind) {
      case "spec":
        this.state = { ...this.state, spec: newerRecord(this.state.spec, decoded.record) };
        return;
      case "buckets":
        this.state = { ...this.state, buckets: newerRecord(this.state.buckets, decoded.record) };
        return;
      case "leader":
        this.state = { ...this.state, leader: newerRecord(this.state.leader, decoded.record) };
        return;
      default:
        this.log(`ignored a record of "${this.topic}": ${decoded.reason}`);
    }
  }

  private wakeWaiters(): void {
    const ready = this.waiters.filter((w) => this.position >= w.offset);
    if (ready.length === 0) return;
    this.waiters = this.waiters.filter((w) => this.position < w.offset);
    for (const waiter of ready) waiter.resolve();
  }
}
