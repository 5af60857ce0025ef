import type { Admin, ConfigResourceTypes } from "kafkajs";
import { STATE_RECORD_MAX_BYTES } from "@sluice/failover-ports";
import { brokerReplicationFactor } from "./ensure-topics.ts";

// kafkajs's CommonJS index is not fully visible to ESM named imports (ConfigResourceTypes is not).
const TOPIC_RESOURCE: ConfigResourceTypes.TOPIC = 2;

/**
 * The configuration of `<pipeline>.controller-state` (docs/design.md §5.3): one partition (one order for
 * every record), compacted (the latest of each key is all that matters), gzip-compressed, and a
 * batch limit twice the bound of one record, so every record the controller writes fits.
 */
export const STATE_TOPIC_CONFIG: Readonly<Record<string, string>> = {
  "cleanup.policy": "compact",
  "compression.type": "gzip",
  "max.message.bytes": String(2 * STATE_RECORD_MAX_BYTES),
};

/** Creates the topic, or sets the configuration above on one made before it had it. */
export async function ensureStateTopic(admin: Admin, topic: string): Promise<void> {
  const configEntries = Object.entries(STATE_TOPIC_CONFIG).map(([name, value]) => ({ name, value }));
  const present = new Set(await admin.listTopics());
  if (!present.has(topic)) {
    const replicationFactor = await brokerReplicationFactor(admin);
    await admin.createTopics({ topics: [{ topic, numPartitions: 1, replicationFactor, configEntries }], waitForLeaders: true });
    return;
  }
  const described = await admin.describeConfigs({
    resources: [{ type: TOPIC_RESOURCE, name: topic, configNames: Object.keys(STATE_TOPIC_CONFIG) }],
    includeSynonyms: false,
  });
  const current = new Map((described.resources[0]?.configEntries ?? []).map((e) => [e.configName, e.configValue]));
  if (configEntries.every(({ name, value }) => current.get(name) === value)) return;
  // AlterConfigs (not incremental) replaces the topic's overrides: all of ours go in together.
  await admin.alterConfigs({ validateOnly: false, resources: [{ type: TOPIC_RESOURCE, name: topic, configEntries }] });
}
