import type { CompressionTypes, Kafka, Message, Producer } from "kafkajs";
import { STATE_RECORD_MAX_BYTES, StateWriterFencedError } from "@sluice/failover-ports";
import { KafkaIoError, describeError } from "./kafka-io-error.ts";
import { FENCING_ERRORS, RETRY_LATER_ERRORS, hasErrorType } from "./partition-transactions.ts";

// kafkajs's CommonJS index is not fully visible to ESM named imports (CompressionTypes is not).
const GZIP: CompressionTypes.GZIP = 1;
/** How long a claim keeps retrying while the previous holder's transaction is being aborted. */
const CLAIM_TIMEOUT_MS = 30_000;
/** The broker aborts a transaction left open this long (a leader that died in the middle of a write). */
const TRANSACTION_TIMEOUT_MS = 10_000;

export interface StateMessage {
  readonly key: string;
  /** null: a tombstone. */
  readonly value: string | null;
}

/**
 * The one writer of `<pipeline>.controller-state` (docs/design.md §5.3): a kafkajs transactional producer
 * whose transactional id is `<pipeline>.controller`. Claiming it (InitProducerId) aborts what an
 * earlier holder left open and makes the broker refuse its later writes, so a deposed leader's
 * late write — a retry kafkajs sends across a network cut included — never lands. Every write is
 * one committed transaction, gzip-compressed, each record at most STATE_RECORD_MAX_BYTES.
 */
export class ControllerStateWriter {
  private producer: Producer | null = null;
  private fenced: StateWriterFencedError | null = null;
  /** A write failed otherwise: kafkajs may have left the producer mid-commit, so the next write claims a new one. */
  private broken = false;
  /** Writes go one at a time: a producer has one transaction open at most. */
  private queue: Promise<void> = Promise.resolve();
  /** Claims so far: each is a leadership, and a write belongs to the one it was asked under. */
  private claims = 0;

  constructor(
    private readonly kafka: Kafka,
    private readonly transactionalId: string,
    private readonly topic: string,
  ) {}

  /**
   * Claims the transactional id for a new leadership with a new producer, fencing every earlier
   * holder. A write asked for before the claim is refused when its turn comes (see writeNow).
   */
  async claim(signal?: AbortSignal): Promise<void> {
    this.claims += 1;
    await this.claimProducer(signal);
  }

  private async claimProducer(signal?: AbortSignal): Promise<void> {
    await this.drop();
    this.fenced = null;
    const producer = this.kafka.producer({
      transactionalId: this.transactionalId,
      idempotent: true,
      maxInFlightRequests: 1,
      transactionTimeout: TRANSACTION_TIMEOUT_MS,
      allowAutoTopicCreation: false,
    });
    const deadline = Date.now() + CLAIM_TIMEOUT_MS;
    for (let attempt = 1; ; attempt++) {
      try {
        await producer.connect();
        // transaction() sends InitProducerId for the transactional id: this is the fencing step.
        const probe = await producer.transaction();
        await probe.abort();
        this.producer = producer;
        this.broken = false;
        return;
      } catch (error) {
        if (signal?.aborted || Date.now() >= deadline || !hasErrorType(error, RETRY_LATER_ERRORS, true)) {
          await producer.disconnect().catch(() => undefined);
          throw new KafkaIoError(
            "TRANSACTION_FAILED",
            `claiming the writer "${this.transactionalId}" of "${this.topic}" failed after ${attempt} attempt(s): ${describeError(error)}`,
            { topic: this.topic, transactionalId: this.transactionalId },
            { cause: error },
          );
        }
        await new Promise((resolve) => setTimeout(resolve, Math.min(2_000, 100 * 2 ** attempt)));
      }
    }
  }

  /** Writes the messages in one committed transaction, after the writes before it. */
  write(messages: readonly StateMessage[]): Promise<void> {
    const claim = this.claims;
    const next = this.queue.then(() => this.writeNow(messages, claim));
    this.queue = next.catch(() => undefined);
    return next;
  }

  private async writeNow(messages: readonly StateMessage[], claim: number): Promise<void> {
    // Its leadership ended with a newer claim. Sent now, a broken writer would claim the id again for
    // it, fencing the new leadership's producer, and its records would land after the new ones.
    if (claim !== this.claims) throw this.claimedAgain(messages.length, "was not sent");
    if (this.fenced) throw this.fenced;
    for (const m of messages) {
      const bytes = m.value === null ? 0 : Buffer.byteLength(m.value, "utf8");
      if (bytes > STATE_RECORD_MAX_BYTES) {
        throw new KafkaIoError(
          "INVALID_RECORD",
          `the record "${m.key}" of "${this.topic}" is ${bytes} bytes, over the bound of ${STATE_RECORD_MAX_BYTES}; it was not written`,
          { topic: this.topic, key: m.key, bytes, maxBytes: STATE_RECORD_MAX_BYTES },
        );
      }
    }
    if (this.broken) await this.claimProducer();
    const producer = this.producer;
    if (!producer) throw new KafkaIoError("CLOSED", `the writer of "${this.topic}" was not claimed (no leadership)`, { topic: this.topic });
    let transaction: Awaited<ReturnType<Producer["transaction"]>> | null = null;
    try {
      transaction = await producer.transaction();
      for (const chunk of chunks(messages)) {
        await transaction.send({ topic: this.topic, acks: -1, compression: GZIP, messages: chunk });
      }
      await transaction.commit();
    } catch (error) {
      // A write that failed after a newer claim (whose producer fenced this one) says nothing about
      // the new leadership's producer: it neither fences nor breaks the writer.
      if (claim !== this.claims) throw this.claimedAgain(messages.length, `failed (${describeError(error)})`, error);
      if (hasErrorType(error, FENCING_ERRORS, false)) {
        this.fenced = new StateWriterFencedError(
          `Kafka fenced the writer "${this.transactionalId}" of "${this.topic}": another controller claimed it since (${describeError(error)})`,
          { cause: error },
        );
        throw this.fenced;
      }
      this.broken = true;
      await transaction?.abort().catch(() => undefined);
      throw new KafkaIoError(
        "SEND_FAILED",
        `writing ${messages.length} record(s) to "${this.topic}" failed: ${describeError(error)}`,
        { topic: this.topic },
        { cause: error },
      );
    }
  }

  async close(): Promise<void> {
    await this.drop();
  }

  private claimedAgain(count: number, what: string, cause?: unknown): KafkaIoError {
    return new KafkaIoError(
      "CLOSED",
      `a write of ${count} record(s) to "${this.topic}" asked for before the writer "${this.transactionalId}" was claimed again (a new leadership) ${what}`,
      { topic: this.topic, transactionalId: this.transactionalId },
      cause === undefined ? undefined : { cause },
    );
  }

  private async drop(): Promise<void> {
    const producer = this.producer;
    this.producer = null;
    await producer?.disconnect().catch(() => undefined);
  }
}

/** The messages in sends of at most STATE_RECORD_MAX_BYTES each (one record batch per send). */
function chunks(messages: readonly StateMessage[]): Message[][] {
  const out: Message[][] = [];
  let current: Message[] = [];
  let bytes = 0;
  for (const { key, value } of messages) {
    const size = key.length + (value === null ? 0 : Buffer.byteLength(value, "utf8"));
    if (current.length > 0 && bytes + size > STATE_RECORD_MAX_BYTES) {
      out.push(current);
      current = [];
      bytes = 0;
    }
    current.push({ key, value });
    bytes += size;
  }
  if (current.length > 0) out.push(current);
  return out;
}
