import { AssignerProtocol, type Consumer, type Kafka, type PartitionAssigner } from "kafkajs";
import type { ControllerElection, ElectionListener } from "@sluice/failover-ports";
import { controllerGroupId, controllerStateTopic } from "./controller-state-records.ts";
import { describeError } from "./kafka-io-error.ts";
import { RestartingConsumer } from "./restarting-consumer.ts";

export interface KafkaControllerElectionOptions {
  readonly kafka: Kafka;
  readonly pipeline: string;
  /** This controller's address, carried in its membership so the assignment can prefer a stable order. */
  readonly address: string;
  /** `kafka.session_timeout`: how soon a dead leader's membership expires. */
  readonly sessionTimeoutMs: number;
  /** Default: a sixth of the session timeout, at least 500 ms (1 s for 6 s). */
  readonly heartbeatIntervalMs?: number;
  readonly log?: (line: string) => void;
  /**
   * The controller's clock (default the system clock, the FailoverController's default): every
   * time this election reports is on it, never on kafkajs's `Date.now()` stamps.
   */
  readonly clock?: { now(): number };
}

/** What each member says about itself in its JoinGroup metadata (`userData`). */
interface Claim {
  readonly address: string;
  /** The generation it leads and serves in, or null. */
  readonly leads: number | null;
}

const ASSIGNER_NAME = "SluiceControllerLeader";

/** @sluice/core's systemClock (this package does not depend on core): epoch ms that never step. */
const TIME_ORIGIN = performance.timeOrigin;
const MONOTONIC_EPOCH_CLOCK = { now: () => TIME_ORIGIN + performance.now() };

/**
 * The election of docs/design.md §5.2 on Kafka's group membership (the pattern of Schema Registry and Kafka
 * Connect, reference/wave2.md §1): every controller joins the consumer group `<pipeline>.controller`
 * on the one-partition topic `<pipeline>.controller-state`, and whoever the assignment gives
 * partition 0 leads. The assignment (computed by the group's Kafka leader with this assigner) keeps
 * partition 0 with the member that claims to lead in the highest generation, so a joining member
 * never takes over; when nobody claims, the smallest address wins.
 *
 * kafkajs tells a member its generation only with each heartbeat, so a result is reported at the
 * first heartbeat after a rebalance, with the send time of the SyncGroup request that decided it.
 *
 * A controller must be able to lead again after any broker outage, so the group's consumer is a
 * RestartingConsumer: one that kafkajs gives up on (a crash it does not restart from) is replaced
 * by a new member, and the outage is reported to the listener as a lost membership with its cause.
 */
export class KafkaControllerElection implements ControllerElection {
  private readonly topic: string;
  private readonly groupId: string;
  private readonly log: (line: string) => void;
  /** The group's consumer, started again whenever kafkajs gives up on it (null before start). */
  private consumers: RestartingConsumer | null = null;
  private listener: ElectionListener | null = null;
  /** A result of join + sync waiting for the heartbeat that tells its generation. */
  private pending: { leading: boolean; memberId: string; syncSentAtMs: number } | null = null;
  /** Send times of the last SyncGroup and Heartbeat on the controller's clock; null when not known safely. */
  private lastSyncSentAtMs: number | null = null;
  private lastHeartbeatSentAtMs: number | null = null;
  private readonly clock: { now(): number };
  private closing: Promise<void> | null = null;

  constructor(private readonly options: KafkaControllerElectionOptions) {
    this.topic = controllerStateTopic(options.pipeline);
    this.groupId = controllerGroupId(options.pipeline);
    this.log = options.log ?? (() => {});
    this.clock = options.clock ?? MONOTONIC_EPOCH_CLOCK;
  }

  async start(listener: ElectionListener): Promise<void> {
    if (this.consumers) return;
    this.listener = listener;
    const consumers = new RestartingConsumer({
      what: `the election's consumer of group "${this.groupId}"`,
      create: () => this.createConsumer(),
      run: async (consumer) => {
        await consumer.connect();
        await consumer.subscribe({ topic: this.topic, fromBeginning: false });
        // The records are the state store's business; the leader only holds the partition.
        await consumer.run({ autoCommit: false, eachBatchAutoResolve: true, eachBatch: async () => {} });
      },
      log: this.log,
    });
    this.consumers = consumers;
    await consumers.start();
  }

  close(): Promise<void> {
    // Leaving the group (in the consumer's disconnect) lets the others rebalance at once instead of
    // after the session timeout; a broker that is down cannot hold the close for longer than its bound.
    this.closing ??= this.consumers?.close() ?? Promise.resolve();
    return this.closing;
  }

  /**
   * One consumer of the group with the election's listeners. A replacement (RestartingConsumer) is a
   * new member: what the last one was waiting to report belongs to a membership that ended.
   */
  private createConsumer(): Consumer {
    this.pending = null;
    this.lastSyncSentAtMs = null;
    this.lastHeartbeatSentAtMs = null;
    const sessionTimeout = this.options.sessionTimeoutMs;
    const consumer = this.options.kafka.consumer({
      groupId: this.groupId,
      sessionTimeout,
      // Members rejoin at their next heartbeat; a member that cannot within a session is gone anyway.
      rebalanceTimeout: sessionTimeout,
      heartbeatInterval: this.options.heartbeatIntervalMs ?? Math.max(500, Math.floor(sessionTimeout / 6)),
      // Heartbeats are sent from the fetch loop: a short fetch wait keeps them on time.
      maxWaitTimeInMs: 250,
      allowAutoTopicCreation: false,
      partitionAssigners: [this.assigner()],
      retry: { retries: Number.MAX_SAFE_INTEGER, initialRetryTime: 300, maxRetryTime: 2_000 },
    });
    const current = () => this.consumers?.isCurrent(consumer) ?? false;
    const { REQUEST, GROUP_JOIN, HEARTBEAT, CRASH, STOP } = consumer.events;
    consumer.on(REQUEST, ({ payload }) => {
      if (!current()) return;
      if (payload.apiName === "SyncGroup") this.lastSyncSentAtMs = onClock(payload.sentAt, Date.now(), this.clock.now());
      else if (payload.apiName === "Heartbeat") this.lastHeartbeatSentAtMs = onClock(payload.sentAt, Date.now(), this.clock.now());
    });
    consumer.on(GROUP_JOIN, ({ payload }) => {
      if (!current()) return;
      const partitions = payload.memberAssignment[this.topic] ?? [];
      // A send time not known safely confirms nothing: the lease starts lapsed and the next heartbeat renews it.
      const syncSentAtMs = this.lastSyncSentAtMs ?? Number.NEGATIVE_INFINITY;
      this.pending = { leading: partitions.includes(0), memberId: payload.memberId, syncSentAtMs };
    });
    consumer.on(HEARTBEAT, ({ payload }) => {
      if (!current()) return;
      const pending = this.pending;
      this.pending = null;
      if (pending) {
        this.listener?.onElected({
          generation: payload.groupGenerationId,
          memberId: pending.memberId,
          leading: pending.leading,
          confirmedAtMs: pending.syncSentAtMs,
        });
      }
      const sentAtMs = this.lastHeartbeatSentAtMs;
      if (sentAtMs !== null) this.listener?.onConfirmed(payload.groupGenerationId, sentAtMs);
    });
    consumer.on(CRASH, ({ payload }) => {
      if (!current()) return;
      this.pending = null;
      const next = payload.restart ? "kafkajs restarts it" : "a new consumer joins the group";
      this.listener?.onLost(`the group consumer crashed: ${describeError(payload.error)}; ${next}`);
    });
    consumer.on(STOP, () => {
      if (!current()) return;
      this.pending = null;
      this.listener?.onLost("the group consumer stopped");
    });
    return consumer;
  }

  private assigner(): PartitionAssigner {
    const topic = this.topic;
    return () => ({
      name: ASSIGNER_NAME,
      version: 0,
      protocol: ({ topics }) => ({
        name: ASSIGNER_NAME,
        metadata: AssignerProtocol.MemberMetadata.encode({
          version: 0,
          topics,
          userData: Buffer.from(JSON.stringify(this.ownClaim()), "utf8"),
        }),
      }),
      assign: async ({ members }) => {
        const claims = members.map((m) => ({ memberId: m.memberId, claim: parseClaim(m.memberMetadata) }));
        const leader = chooseLeader(claims);
        if (leader) this.log(`assigning the leadership of group "${this.groupId}" to ${leader.claim.address || leader.memberId}`);
        return members.map((m) => ({
          memberId: m.memberId,
          memberAssignment: AssignerProtocol.MemberAssignment.encode({
            version: 0,
            assignment: m.memberId === leader?.memberId ? { [topic]: [0] } : {},
            userData: Buffer.alloc(0),
          }),
        }));
      },
    });
  }

  private ownClaim(): Claim {
    const claim = this.listener?.claim() ?? null;
    return { address: this.options.address, leads: claim?.generation ?? null };
  }
}

function parseClaim(metadata: Buffer): Claim {
  try {
    const decoded = AssignerProtocol.MemberMetadata.decode(metadata);
    const parsed: unknown = JSON.parse(decoded?.userData.toString("utf8") ?? "");
    const o = (typeof parsed === "object" && parsed !== null ? parsed : {}) as Record<string, unknown>;
    return {
      address: typeof o["address"] === "string" ? o["address"] : "",
      leads: typeof o["leads"] === "number" ? o["leads"] : null,
    };
  } catch {
    return { address: "", leads: null };
  }
}

/** The member that claims the highest generation; without claims, the smallest address (then member id). */
export function chooseLeader<T extends { readonly memberId: string; readonly claim: Claim }>(members: readonly T[]): T | null {
  const order = (a: T, b: T) => {
    const ga = a.claim.leads ?? -1;
    const gb = b.claim.leads ?? -1;
    if (ga !== gb) return gb - ga;
    if (a.claim.address !== b.claim.address) return a.claim.address < b.claim.address ? -1 : 1;
    return a.memberId < b.memberId ? -1 : a.memberId > b.memberId ? 1 : 0;
  };
  return [...members].sort(order)[0] ?? null;
}

/**
 * A kafkajs request time (`sentAtWallMs`, its `Date.now()`) on the controller's clock: the time
 * since on the wall clock, taken from the controller clock's now. The two clocks differ by any step
 * of the wall clock since the process started (NTP), so their readings are never compared directly.
 * A step back while the request was out makes the elapsed time negative: then the send time is not
 * known safely, and null confirms nothing (a step forward only makes it look older: safe).
 */
export function onClock(sentAtWallMs: number, wallNowMs: number, clockNowMs: number): number | null {
  const elapsed = wallNowMs - sentAtWallMs;
  return elapsed >= 0 ? clockNowMs - elapsed : null;
}
