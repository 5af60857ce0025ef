import type { Admin } from "kafkajs";

// Creating a topic on a broker that may be slow to publish its metadata: shared by the tests
// (test/support/kafka.ts) and the bench (bench/lib/kafka.ts).

/** How long a created topic may take to have a leader for every partition on a loaded broker. */
const TOPIC_READY_TIMEOUT_MS = 60_000;

/** Creates `topic` and returns once every partition has a leader. */
export async function createTopicWithLeaders(admin: Admin, topic: string, partitions: number): Promise<void> {
  try {
    await admin.createTopics({ topics: [{ topic, numPartitions: partitions, replicationFactor: 1 }], waitForLeaders: true });
  } catch (error) {
    // kafkajs's wait for leaders gives up with UNKNOWN_TOPIC_OR_PARTITION (retriable) when a
    // loaded broker (or one just started) is slow to publish the new topic's metadata: the topic
    // was created, so wait for its leaders here instead.
    if (!(error instanceof Error && "retriable" in error && error.retriable === true)) throw error;
    await waitForLeaders(admin, topic, partitions);
  }
}

async function waitForLeaders(admin: Admin, topic: string, partitions: number): Promise<void> {
  const deadline = Date.now() + TOPIC_READY_TIMEOUT_MS;
  for (;;) {
    const led = await admin.fetchTopicMetadata({ topics: [topic] }).then(
      (metadata) => metadata.topics[0]?.partitions.filter((p) => p.leader >= 0).length ?? 0,
      () => 0,
    );
    if (led >= partitions) return;
    // Not there at all: the first request may have failed before the broker created it (a second
    // create of a topic that exists answers false, it does not throw).
    if (led === 0) await admin.createTopics({ topics: [{ topic, numPartitions: partitions, replicationFactor: 1 }] }).catch(() => false);
    if (Date.now() > deadline) throw new Error(`topic ${topic}: ${led} of ${partitions} partitions have a leader after ${TOPIC_READY_TIMEOUT_MS} ms`);
    await new Promise((resolve) => setTimeout(resolve, 250));
  }
}
