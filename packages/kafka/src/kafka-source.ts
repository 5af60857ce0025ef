import type { Consumer, ConsumerCrashEvent, ConsumerGroupJoinEvent, EachBatchPayload } from "kafkajs";
import type { BatchHandler, PartitionRef, Source, SourceListener } from "@sluice/runtime";
import { CommitCoalescer } from "./commit-coalescer.ts";
import { ignoreNotRunning, isGroupChange } from "./kafka-consumer-helpers.ts";
import { JoinWaiters } from "./join-waiters.ts";
import { KafkaIoError, describeError, isKafkaIoError } from "./kafka-io-error.ts";
import { resolveSourceSettings, type KafkaSourceInit, type KafkaSourceOptions, type KafkaSourceSettings } from "./kafka-source-options.ts";
import { PartitionDelivery } from "./partition-delivery.ts";
import { PartitionTransactions } from "./partition-transactions.ts";
import { PartitionLease, PartitionSlot, slotKey } from "./partition-lease.ts";
import { StreamTopics, type StreamTopic } from "./stream-topics.ts";

export type { KafkaSourceInit, KafkaSourceOptions } from "./kafka-source-options.ts";

/**
 * The runtime's Source over one Kafka consumer group, `<pipeline>.<computation>`, subscribed to the
 * topics of the computation's input streams.
 *
 * kafkajs's fetch loop waits until every batch of one fetch has been handled before it fetches again
 * (per broker, whatever partitionsConsumedConcurrently says), and it heartbeats only from that loop.
 * A handler that waits minutes for quota would therefore stall the other partitions and get the
 * member expelled. So `eachBatch` only hands the batch to a per-partition queue and returns at once;
 * each partition has its own drain loop calling the handler, at most one call at a time, in offset
 * order. A partition with a full queue (prefetchBatchesPerPartition beyond the batch in flight) is
 * paused, so kafkajs keeps fetching the others and keeps heartbeating while a handler waits.
 *
 * Ownership is tracked per partition as a PartitionLease, created by the group join that assigns
 * the partition and aborted (the handler's signal) by the join that takes it away, by the consumer
 * stopping, or by close(). Commits of an aborted lease are refused, so a late handler never commits
 * for the next owner. Offsets are committed only through `BatchContext.commit` (autoCommit off),
 * merged and sent asynchronously by a CommitCoalescer; close() sends what is left before leaving.
 */
export class KafkaSource implements Source {
  readonly groupId: string;
  private readonly consumer: Consumer;
  private readonly settings: KafkaSourceSettings;
  private readonly onError: (error: KafkaIoError) => void;
  private readonly commits: CommitCoalescer;
  /** Hands each partition's batches to the handler: one call at a time per partition, in offset order. */
  private readonly delivery: PartitionDelivery;
  /** delivery "exactly_once" only: one transactional producer per owned partition. */
  private readonly transactions: PartitionTransactions | null;
  /** Input streams by topic. */
  private readonly inputs = new Map<string, StreamTopic>();
  private readonly slots = new Map<string, PartitionSlot>();
  private readonly joinWaiters = new JoinWaiters();
  private readonly removeListeners: (() => void)[] = [];
  private handler: BatchHandler | null = null;
  private listener: SourceListener = {};
  /** kafkajs's member id at the last join; a different one means this member was expelled in between. */
  private memberId: string | null = null;
  private fatal: KafkaIoError | null = null;
  private started: Promise<void> | null = null;
  /** connect + subscribe + run; close() waits for it so that it never races a starting consumer. */
  private launching: Promise<void> | null = null;
  private closing: Promise<void> | null = null;
  /** Group joins seen; the commit coalescer compares counts to know whether a rebalance was answered. */
  private joins = 0;
  /** Leases ended by close() whose offsets may still be committed until the member leaves the group. */
  private leftAtClose: PartitionLease[] = [];

  constructor(init: KafkaSourceInit, options: KafkaSourceOptions = {}) {
    const { kafka, pipeline, computation } = init;
    this.groupId = `${pipeline.pipeline}.${computation}`;
    for (const input of StreamTopics.inputsOf(pipeline, computation, init.computationSpec?.inputs)) this.inputs.set(input.topic, input);
    this.settings = resolveSourceSettings(options);
    this.onError = options.onError ?? ((error) => process.emitWarning(error));
    this.consumer = kafka.consumer({
      groupId: this.groupId,
      sessionTimeout: this.settings.sessionTimeoutMs,
      heartbeatInterval: this.settings.heartbeatIntervalMs,
      rebalanceTimeout: this.settings.rebalanceTimeoutMs,
      maxWaitTimeInMs: this.settings.maxWaitTimeMs,
      maxBytesPerPartition: this.settings.maxBytesPerPartition,
      allowAutoTopicCreation: false,
    });
    this.transactions = PartitionTransactions.when((init.computationSpec ?? pipeline.computations[computation])?.delivery, {
      kafka,
      pipeline,
      groupId: this.groupId,
      transactionTimeoutMs: this.settings.transactionTimeoutMs,
      claimTimeoutMs: this.settings.transactionTimeoutMs + this.settings.sessionTimeoutMs,
    });
    this.commits = new CommitCoalescer({
      groupId: this.groupId,
      send: (offsets) => this.consumer.commitOffsets(offsets),
      isGroupChange,
      waitForJoin: () => this.waitForJoin(this.settings.sessionTimeoutMs + this.settings.rebalanceTimeoutMs),
      joins: () => this.joins,
      intervalMs: this.settings.commitIntervalMs,
      maxAttempts: this.settings.maxCommitAttempts,
    });
    this.delivery = new PartitionDelivery({
      groupId: this.groupId,
      prefetchBatchesPerPartition: this.settings.prefetchBatchesPerPartition,
      transactions: this.transactions,
      fencedReclaimDelayMs: this.settings.sessionTimeoutMs,
      commits: this.commits,
      handler: () => this.handler,
      onError: this.onError,
      moves: { pause: (slot) => this.pause(slot), resume: (slot) => this.resume(slot), seek: (slot, offset) => this.seek(slot, offset) },
    });
  }

  /** Partitions this source owns now. */
  assignment(): PartitionRef[] {
    return [...this.slots.values()].flatMap((slot) => (slot.lease?.active ? [slot.lease.ref] : []));
  }

  /** Resolves once the consumer has joined its group (listener.onAssigned has been called). */
  start(handler: BatchHandler, listener: SourceListener = {}): Promise<void> {
    if (this.closing) return Promise.reject(this.closedError("start"));
    this.started ??= this.begin(handler, listener);
    return this.started;
  }

  /** Aborts every handler's signal, waits for the handlers to return, leaves the group. Idempotent. */
  close(): Promise<void> {
    this.closing ??= this.shutdown();
    return this.closing;
  }

  private async begin(handler: BatchHandler, listener: SourceListener): Promise<void> {
    this.handler = handler;
    this.listener = listener;
    const { GROUP_JOIN, STOP, CRASH, REBALANCING } = this.consumer.events;
    this.removeListeners.push(
      this.consumer.on(GROUP_JOIN, (event: ConsumerGroupJoinEvent) => this.onGroupJoin(event.payload)),
      // Best effort, since kafkajs has no revoke hook: the offsets asked for so far go out before the
      // partitions may move, so their next owner redoes less.
      this.consumer.on(REBALANCING, () => this.commits.hurry()),
      this.consumer.on(STOP, () => this.onStop()),
      this.consumer.on(CRASH, (event: ConsumerCrashEvent) => this.onCrash(event.payload)),
    );
    const joined = this.waitForJoin(this.settings.joinTimeoutMs);
    joined.catch(() => undefined); // observed below; this keeps an early failure from being "unhandled"
    try {
      this.launching = this.launch();
      await this.launching;
      await joined;
    } catch (error) {
      const failure = isKafkaIoError(error)
        ? error
        : new KafkaIoError(
            "SOURCE_START_FAILED",
            `consumer group "${this.groupId}" could not start on topics ${this.topicList()}: ${describeError(error)}`,
            { groupId: this.groupId, topics: [...this.inputs.keys()] },
            { cause: error },
          );
      await this.close();
      throw failure;
    }
  }

  private async launch(): Promise<void> {
    await this.consumer.connect();
    await this.consumer.subscribe({ topics: [...this.inputs.keys()], fromBeginning: true });
    if (this.closing) throw this.closedError("start");
    const partitions = [...this.inputs.values()].reduce((sum, input) => sum + input.partitions, 0);
    // Resolves after the first join (or after kafkajs gave up and crashed, which onCrash reports).
    await this.consumer.run({
      autoCommit: false,
      eachBatchAutoResolve: false,
      // eachBatch only enqueues, so this mostly spreads the hand-over; one worker per partition it may own.
      partitionsConsumedConcurrently: Math.max(1, partitions),
      eachBatch: async (payload) => this.onBatch(payload),
    });
  }

  private async shutdown(): Promise<void> {
    const closed = this.closedError("close");
    this.leftAtClose = [...this.slots.values()].flatMap((slot) => (slot.lease?.active ? [slot.lease] : []));
    this.notifyRevoked(
      this.revokeWhere(
        () => true,
        () => closed,
        { stillMember: true },
      ),
    );
    this.joinWaiters.rejectAll(closed);
    this.pauseAll();
    await this.launching?.catch(() => undefined);
    await Promise.all([...this.slots.values()].map((slot) => slot.drained));
    // Still a member: what the jobs asked to commit goes out now, so the next owner does not redo it.
    await this.commits.flush();
    await this.transactions?.close();
    try {
      await this.consumer.disconnect();
    } catch (error) {
      this.onError(
        new KafkaIoError(
          "CLOSED",
          `consumer group "${this.groupId}" did not leave cleanly: ${describeError(error)}`,
          { groupId: this.groupId },
          { cause: error },
        ),
      );
    }
    for (const remove of this.removeListeners.splice(0)) remove();
  }

  // ---- kafkajs callbacks ----------------------------------------------------------------------

  private async onBatch(payload: EachBatchPayload): Promise<void> {
    if (this.closing) return;
    const slot = this.slots.get(slotKey(payload.batch.topic, payload.batch.partition));
    const lease = slot?.lease;
    if (!slot || !lease || !lease.active) return;
    this.delivery.accept(slot, lease, payload);
  }

  private onGroupJoin({ memberId, memberAssignment }: ConsumerGroupJoinEvent["payload"]): void {
    this.joins += 1;
    if (this.closing) {
      // kafkajs may complete a rebalance while this member is leaving; whatever it owned may have moved.
      for (const lease of this.leftAtClose.splice(0)) lease.endMembership();
      return;
    }
    const expelled = this.memberId !== null && memberId !== this.memberId;
    this.memberId = memberId;
    const assigned = new Set<string>();
    const order: [string, number][] = [];
    for (const [topic, partitions] of Object.entries(memberAssignment)) {
      if (!this.inputs.has(topic)) continue;
      for (const partition of [...partitions].sort((a, b) => a - b)) {
        assigned.add(slotKey(topic, partition));
        order.push([topic, partition]);
      }
    }
    const revoked = this.revokeWhere(
      (slot) => expelled || !assigned.has(slotKey(slot.topic, slot.partition)),
      (lease) =>
        new KafkaIoError(
          "PARTITION_REVOKED",
          `partition ${lease.partition} of topic "${lease.topic}" (stream "${lease.stream}") was ` +
            (expelled
              ? `lost: this member of group "${this.groupId}" was expelled and rejoined as ${memberId}`
              : `assigned elsewhere by a rebalance of group "${this.groupId}"`) +
            "; the next owner resumes from the last committed offset",
          { groupId: this.groupId, topic: lease.topic, partition: lease.partition, stream: lease.stream },
        ),
    );
    const refs: PartitionRef[] = [];
    for (const [topic, partition] of order) {
      const input = this.inputs.get(topic);
      if (!input) continue;
      const key = slotKey(topic, partition);
      let slot = this.slots.get(key);
      if (!slot) {
        slot = new PartitionSlot(topic, partition);
        this.slots.set(key, slot);
      }
      if (slot.lease?.active && this.transactions?.isFenced(slot.lease)) {
        // Fenced but assigned here again: give up that lease and claim the partition afresh.
        const stale = slot.lease;
        stale.revoke(
          new KafkaIoError("PARTITION_REVOKED", `partition ${partition} of topic "${topic}" was claimed by another member before this rebalance gave it back`, {
            groupId: this.groupId,
            topic,
            partition,
          }),
        );
        void this.transactions.release(stale);
        slot.lease = null;
        slot.dropPending();
      }
      const lease = slot.lease;
      if (lease?.active) {
        // Retained: kafkajs starts the new generation from the committed offset; continue where this lease is.
        if (lease.nextOffset !== undefined && !lease.rewindRequested) this.seek(slot, lease.nextOffset);
      } else {
        const fresh = new PartitionLease(input.stream, topic, partition);
        slot.lease = fresh;
        if (this.transactions) {
          fresh.claiming = true;
          this.pause(slot);
          void this.delivery.claim(slot, fresh);
        } else if (slot.draining)
          this.pause(slot); // a handler of the previous lease may still be running; the new one waits for it
        else this.resume(slot);
      }
      refs.push({ stream: input.stream, partition });
    }
    this.notifyRevoked(revoked);
    this.notify("onAssigned", refs);
    this.joinWaiters.resolveAll();
  }

  private onStop(): void {
    this.memberId = null;
    if (this.closing) return;
    this.notifyRevoked(
      this.revokeWhere(
        () => true,
        (lease) =>
          new KafkaIoError(
            "PARTITION_REVOKED",
            `the consumer of group "${this.groupId}" stopped, so partition ${lease.partition} of topic "${lease.topic}" (stream "${lease.stream}") is no longer owned`,
            { groupId: this.groupId, topic: lease.topic, partition: lease.partition, stream: lease.stream },
          ),
      ),
    );
  }

  private onCrash({ error, restart }: ConsumerCrashEvent["payload"]): void {
    if (restart || this.closing) return; // kafkajs restarts it and rejoins; onStop already revoked
    this.fatal = new KafkaIoError(
      "CONSUMER_CRASHED",
      `the consumer of group "${this.groupId}" on topics ${this.topicList()} crashed and kafkajs will not restart it: ${describeError(error)}`,
      { groupId: this.groupId },
      { cause: error },
    );
    this.joinWaiters.rejectAll(this.fatal);
    this.onError(this.fatal);
  }

  // ---- bookkeeping ----------------------------------------------------------------------------

  private revokeWhere(
    predicate: (slot: PartitionSlot) => boolean,
    reason: (lease: PartitionLease) => Error,
    options: { stillMember?: boolean } = {},
  ): PartitionRef[] {
    const revoked: PartitionRef[] = [];
    for (const slot of this.slots.values()) {
      const lease = slot.lease;
      if (!lease?.active || !predicate(slot)) continue;
      lease.revoke(reason(lease), options);
      if (!options.stillMember) void this.transactions?.release(lease);
      slot.lease = null;
      slot.dropPending();
      revoked.push(lease.ref);
    }
    return revoked;
  }

  private waitForJoin(timeoutMs: number, signal?: AbortSignal): Promise<void> {
    if (this.fatal) return Promise.reject(this.fatal);
    if (this.closing) return Promise.reject(this.closedError("wait for a group join"));
    const timeout = () =>
      new KafkaIoError("SOURCE_START_FAILED", `consumer group "${this.groupId}" on topics ${this.topicList()} did not complete a join within ${timeoutMs} ms`, {
        groupId: this.groupId,
        timeoutMs,
      });
    return this.joinWaiters.wait(timeoutMs, timeout, signal);
  }

  private notifyRevoked(refs: PartitionRef[]): void {
    if (refs.length > 0) this.notify("onRevoked", refs);
  }

  /** Listener errors must not reach kafkajs: its join would fail on them. */
  private notify(event: "onAssigned" | "onRevoked", refs: PartitionRef[]): void {
    try {
      this.listener[event]?.(refs);
    } catch (error) {
      this.onError(
        new KafkaIoError(
          "LISTENER_FAILED",
          `listener ${event} of group "${this.groupId}" threw: ${describeError(error)}`,
          { groupId: this.groupId },
          { cause: error },
        ),
      );
    }
  }

  // consumer.pause/resume/seek throw while kafkajs has no running group: see ignoreNotRunning.
  private pause(slot: PartitionSlot): void {
    ignoreNotRunning(() => this.consumer.pause([{ topic: slot.topic, partitions: [slot.partition] }]));
  }

  private resume(slot: PartitionSlot): void {
    ignoreNotRunning(() => this.consumer.resume([{ topic: slot.topic, partitions: [slot.partition] }]));
  }

  private seek(slot: PartitionSlot, offset: string): void {
    ignoreNotRunning(() => this.consumer.seek({ topic: slot.topic, partition: slot.partition, offset }));
  }

  private pauseAll(): void {
    ignoreNotRunning(() => this.consumer.pause([...this.inputs.keys()].map((topic) => ({ topic }))));
  }

  private closedError(what: string): KafkaIoError {
    return new KafkaIoError("CLOSED", `${what}: the source of consumer group "${this.groupId}" is closed`, { groupId: this.groupId });
  }

  private topicList(): string {
    return [...this.inputs.keys()].map((t) => `"${t}"`).join(", ");
  }
}
