import type { Admin, Kafka, Producer, Transaction } from "kafkajs";
import type { BatchTransaction, SinkRecord } from "@sluice/runtime";
import type { DeliveryMode, PipelineSpec } from "@sluice/spec";
import { KAFKA_SINK_DEFAULTS } from "./defaults.ts";
import { KafkaIoError, describeError } from "./kafka-io-error.ts";
import { checkedPartitioner, toMessage } from "./kafka-sink.ts";
import type { PartitionLease } from "./partition-lease.ts";
import { StreamTopics } from "./stream-topics.ts";

/** Broker answers meaning another producer with the same transactional id took over (it claimed the partition). */
export const FENCING_ERRORS = new Set(["INVALID_PRODUCER_EPOCH", "PRODUCER_FENCED", "INVALID_PRODUCER_ID_MAPPING", "TRANSACTIONAL_ID_AUTHORIZATION_FAILED"]);
/** Answers after which the same transaction may be tried again (kafkajs #296: a crashed owner's transaction is still being aborted). */
export const RETRY_LATER_ERRORS = new Set(["CONCURRENT_TRANSACTIONS", "COORDINATOR_LOAD_IN_PROGRESS", "COORDINATOR_NOT_AVAILABLE", "NOT_COORDINATOR"]);

export interface PartitionTransactionsOptions {
  readonly kafka: Kafka;
  readonly pipeline: PipelineSpec;
  readonly groupId: string;
  /** How long a claim keeps retrying while the previous owner's transaction is being aborted. */
  readonly claimTimeoutMs: number;
  /** The broker aborts a transaction left open longer than this (a producer that died mid-batch). */
  readonly transactionTimeoutMs: number;
  /** Default: the sink's (KAFKA_SINK_DEFAULTS.ackTimeoutMs). */
  readonly ackTimeoutMs?: number;
}

interface Claim {
  readonly lease: PartitionLease;
  readonly producer: Producer;
  /** Settles once the producer holds the transactional id, fencing every earlier holder. */
  readonly ready: Promise<void>;
  /** Set when a broker said another producer took the id over: this lease may not commit any more. */
  fenced: KafkaIoError | null;
  /**
   * Set when a transaction failed otherwise (a broker restart, a lost connection): a commit whose
   * answer was lost may still complete, so the committed offset is unknown, and kafkajs leaves the
   * producer in state COMMITTING or ABORTING, refusing every later transaction (kafkajs #1416).
   * The partition is claimed again, with a new producer, before it goes on (needsReclaim).
   */
  broken: boolean;
}

/**
 * Exactly-once delivery (docs/design.md §13) with kafkajs transactions. kafkajs commits offsets in a
 * transaction with TxnOffsetCommit v0–1, which carries no group generation (no KIP-447), so the
 * broker cannot refuse a commit from a member that lost the partition. Fencing comes instead from
 * the transactional id: one producer per input partition, `<group>-<topic>-<partition>`. A new
 * owner claims the partition (InitProducerId: the previous holder's open transaction is aborted
 * and its producer fenced) *before* it reads the committed offset, so it starts exactly after the
 * last committed transaction and a late commit of the old owner is refused.
 */
export class PartitionTransactions {
  private readonly claims = new Map<PartitionLease, Claim>();
  private readonly streams: StreamTopics;
  private admin: Promise<Admin> | null = null;

  private readonly ackTimeoutMs: number;

  constructor(private readonly options: PartitionTransactionsOptions) {
    this.streams = StreamTopics.of(options.pipeline);
    this.ackTimeoutMs = options.ackTimeoutMs ?? KAFKA_SINK_DEFAULTS.ackTimeoutMs;
  }

  /** The transactions of a source whose computation has `delivery: "exactly_once"`; null otherwise. */
  static when(delivery: DeliveryMode | undefined, options: PartitionTransactionsOptions): PartitionTransactions | null {
    return delivery === "exactly_once" ? new PartitionTransactions(options) : null;
  }

  /**
   * Takes the partition's transactional id over and returns the offset to read from: the group's
   * committed offset once no earlier owner can commit any more, or the partition's earliest offset
   * when none was committed yet.
   */
  async claim(lease: PartitionLease): Promise<string> {
    const previous = this.claims.get(lease);
    if (previous) {
      // Claimed again after a failed transaction: the old producer goes first, so that only one holds the id.
      this.claims.delete(lease);
      await previous.ready.catch(() => undefined);
      await previous.producer.disconnect().catch(() => undefined);
    }
    if (!lease.active) {
      throw new KafkaIoError("PARTITION_REVOKED", `partition ${lease.partition} of topic "${lease.topic}" was taken away before it was claimed`, {
        groupId: this.options.groupId,
        topic: lease.topic,
        partition: lease.partition,
      });
    }
    const producer = this.options.kafka.producer({
      transactionalId: `${this.options.groupId}-${lease.topic}-${lease.partition}`,
      idempotent: true,
      maxInFlightRequests: 1,
      transactionTimeout: this.options.transactionTimeoutMs,
      createPartitioner: checkedPartitioner,
      allowAutoTopicCreation: false,
    });
    const ready = this.initialize(lease, producer);
    const claim: Claim = { lease, producer, ready, fenced: null, broken: false };
    this.claims.set(lease, claim);
    ready.catch(() => undefined); // observed by begin() and by the caller below
    await ready;
    return this.committedOffset(lease);
  }

  /** Opens the partition's next transaction (docs/design.md §13); refused once the lease ended or was fenced. */
  async begin(lease: PartitionLease): Promise<BatchTransaction> {
    const claim = this.claims.get(lease);
    const where = `stream "${lease.stream}" (topic "${lease.topic}") partition ${lease.partition} in group "${this.options.groupId}"`;
    if (!claim || !lease.active) {
      throw new KafkaIoError(
        "PARTITION_REVOKED",
        `no transaction for ${where}: this member no longer owns it; the next owner resumes after the last committed transaction`,
        {
          groupId: this.options.groupId,
          topic: lease.topic,
          partition: lease.partition,
        },
      );
    }
    await claim.ready;
    if (claim.fenced) throw claim.fenced;
    if (claim.broken) {
      throw new KafkaIoError(
        "TRANSACTION_FAILED",
        `no transaction for ${where} yet: an earlier one failed with its outcome unknown, so the partition is being claimed again`,
        {
          groupId: this.options.groupId,
          topic: lease.topic,
          partition: lease.partition,
        },
      );
    }
    let transaction: Transaction;
    try {
      transaction = await claim.producer.transaction();
    } catch (error) {
      throw this.failure(claim, `could not begin a transaction for ${where}`, error);
    }
    // One request at a time inside a transaction (kafkajs #430): sends of several streams are chained.
    let chain: Promise<void> = Promise.resolve();
    let ended = false;
    return {
      send: (stream, records) => {
        chain = chain.then(() => this.sendInto(claim, transaction, stream, records));
        return chain;
      },
      commit: async (nextOffset) => {
        await chain;
        if (!lease.active)
          throw new KafkaIoError("PARTITION_REVOKED", `transaction for ${where} not committed: the partition was taken away`, {
            groupId: this.options.groupId,
          });
        try {
          await transaction.sendOffsets({
            consumerGroupId: this.options.groupId,
            topics: [{ topic: lease.topic, partitions: [{ partition: lease.partition, offset: nextOffset }] }],
          });
          await transaction.commit();
          ended = true;
        } catch (error) {
          throw this.failure(
            claim,
            `commit of the transaction for ${where} up to offset ${nextOffset} failed; its outputs stay invisible to read_committed readers`,
            error,
          );
        }
        lease.committedOffset = nextOffset;
        lease.durableOffset = nextOffset;
      },
      abort: async () => {
        if (ended) return;
        ended = true;
        await chain.catch(() => undefined);
        try {
          await transaction.abort();
        } catch {
          // Not aborted for sure (the broker aborts it after transactionTimeoutMs, or the next claim
          // does), and the producer may be stuck in ABORTING: claim the partition again.
          claim.broken = true;
        }
      },
    };
  }

  /**
   * A transaction of this lease failed with its outcome unknown: the partition must be claimed
   * again (claim()) and read from the committed offset the broker then reports.
   */
  needsReclaim(lease: PartitionLease): boolean {
    const claim = this.claims.get(lease);
    return claim !== undefined && claim.broken && claim.fenced === null;
  }

  /** A broker said another producer holds this lease's transactional id now. */
  isFenced(lease: PartitionLease): boolean {
    return this.claims.get(lease)?.fenced != null;
  }

  /** The lease ended: its producer goes (an open transaction of it is aborted by the next claim). */
  async release(lease: PartitionLease): Promise<void> {
    const claim = this.claims.get(lease);
    if (!claim) return;
    this.claims.delete(lease);
    await claim.ready.catch(() => undefined);
    await claim.producer.disconnect().catch(() => undefined);
  }

  async close(): Promise<void> {
    await Promise.all([...this.claims.keys()].map((lease) => this.release(lease)));
    const admin = await this.admin?.catch(() => null);
    await admin?.disconnect().catch(() => undefined);
  }

  private async initialize(lease: PartitionLease, producer: Producer): Promise<void> {
    const deadline = Date.now() + this.options.claimTimeoutMs;
    for (let attempt = 1; ; attempt++) {
      try {
        await producer.connect();
        // transaction() sends InitProducerId for the transactional id: this is the fencing step.
        const probe = await producer.transaction();
        await probe.abort();
        return;
      } catch (error) {
        if (!lease.active) throw error;
        if (Date.now() >= deadline || !hasErrorType(error, RETRY_LATER_ERRORS, true)) {
          throw new KafkaIoError(
            "TRANSACTION_FAILED",
            `claiming stream "${lease.stream}" (topic "${lease.topic}") partition ${lease.partition} for exactly-once delivery failed after ${attempt} attempt(s): ${describeError(error)}`,
            { groupId: this.options.groupId, topic: lease.topic, partition: lease.partition },
            { cause: error },
          );
        }
        await new Promise((resolve) => setTimeout(resolve, Math.min(2000, 100 * 2 ** attempt)));
      }
    }
  }

  private async committedOffset(lease: PartitionLease): Promise<string> {
    this.admin ??= (async () => {
      const admin = this.options.kafka.admin();
      await admin.connect();
      return admin;
    })();
    this.admin.catch(() => {
      this.admin = null;
    });
    const admin = await this.admin;
    const [topic] = await admin.fetchOffsets({ groupId: this.options.groupId, topics: [lease.topic] });
    const offset = topic?.partitions.find((p) => p.partition === lease.partition)?.offset;
    if (offset !== undefined && offset !== "-1") return offset;
    const earliest = (await admin.fetchTopicOffsets(lease.topic)).find((p) => p.partition === lease.partition)?.low;
    return earliest ?? "0";
  }

  private async sendInto(claim: Claim, transaction: Transaction, stream: string, records: readonly SinkRecord[]): Promise<void> {
    if (records.length === 0) return;
    const { topic } = this.streams.stream(stream, "send");
    const messages = records.map((record, index) => toMessage(record, index, stream));
    try {
      await transaction.send({ topic, messages, acks: -1, timeout: this.ackTimeoutMs });
    } catch (error) {
      throw this.failure(claim, `send of ${records.length} record(s) to stream "${stream}" (topic "${topic}") in a transaction failed`, error);
    }
  }

  /** Wraps a broker failure; a fencing answer marks the claim so that this lease commits nothing more. */
  private failure(claim: Claim, what: string, error: unknown): KafkaIoError {
    const fenced = hasErrorType(error, FENCING_ERRORS, false);
    const failure = new KafkaIoError(
      fenced ? "PARTITION_REVOKED" : "TRANSACTION_FAILED",
      `${what}: ${describeError(error)}` +
        (fenced
          ? `; another member claimed partition ${claim.lease.partition} of topic "${claim.lease.topic}" (or the broker expired the transaction), so this producer commits nothing more: ` +
            "a rebalance that moved the partition ends this lease, and a lease still assigned here after a session timeout claims the partition back"
          : "; the partition is claimed again with a new producer and read from the offset its last committed transaction left"),
      { groupId: this.options.groupId, topic: claim.lease.topic, partition: claim.lease.partition },
      { cause: error },
    );
    if (fenced) claim.fenced = failure;
    else claim.broken = true;
    return failure;
  }
}

/** Looks for a kafkajs protocol error `type` in the error and its causes; `retriableDefault` for kafkajs's own retriable flag. */
export function hasErrorType(error: unknown, types: ReadonlySet<string>, retriableDefault: boolean): boolean {
  let current: unknown = error;
  for (let depth = 0; current instanceof Error && depth < 5; depth++) {
    const type: unknown = (current as Error & { type?: unknown }).type;
    if (typeof type === "string" && types.has(type)) return true;
    if (retriableDefault && current.name === "KafkaJSNumberOfRetriesExceeded") return true;
    current = (current as Error & { originalError?: unknown }).originalError ?? current.cause;
  }
  return false;
}
