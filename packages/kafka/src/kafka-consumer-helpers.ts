import type { KafkaMessage } from "kafkajs";
import type { SourceRecord } from "@sluice/runtime";
import { fromKafkaHeaders } from "./kafka-headers.ts";

/**
 * Broker answers meaning the group moved on under a commit; the commit is retried after the next
 * join. (Coordinator moves are retried by kafkajs itself and need no join.)
 */
const GROUP_CHANGE_ERRORS = new Set(["REBALANCE_IN_PROGRESS", "ILLEGAL_GENERATION", "UNKNOWN_MEMBER_ID"]);

export function toSourceRecord(message: KafkaMessage): SourceRecord {
  return {
    key: message.key ?? null,
    value: message.value ?? null,
    headers: fromKafkaHeaders(message.headers),
    offset: message.offset,
    timestampMs: timestampMsOf(message.timestamp),
  };
}

let lastTimestampText = "";
let lastTimestampMs = Number.NaN;

/**
 * kafkajs hands every record's timestamp over as a decimal string of its own. Parsing it was one of
 * the largest per-record costs a Sluice consumer had over a bare one (a string-to-double conversion,
 * ~0.1–0.2 µs), and records of one batch mostly share their millisecond, so the last conversion is
 * kept: an equal string (compared by content) gives the same number.
 */
function timestampMsOf(text: string): number {
  if (text !== lastTimestampText) {
    lastTimestampText = text;
    lastTimestampMs = Number(text);
  }
  return lastTimestampMs;
}

export function isGroupChange(error: unknown): boolean {
  let current: unknown = error;
  for (let depth = 0; current instanceof Error && depth < 4; depth++) {
    const type: unknown = (current as Error & { type?: unknown }).type;
    if (typeof type === "string" && GROUP_CHANGE_ERRORS.has(type)) return true;
    current = current.cause;
  }
  return false;
}

/**
 * consumer.pause/resume/seek throw while kafkajs has no running consumer group (before run(),
 * between a crash and its restart, after stop); then there is nothing to pause or reposition, and
 * the next join decides afresh.
 */
export function ignoreNotRunning(action: () => void): void {
  try {
    action();
  } catch {
    // See above.
  }
}
