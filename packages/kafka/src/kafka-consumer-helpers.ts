/**
 * Broker answers meaning the group moved on under a commit; the commit is retried after the next
 * join. (Coordinator moves are retried by kafkajs itself and need no join.)
 */
const GROUP_CHANGE_ERRORS = new Set(["REBALANCE_IN_PROGRESS", "ILLEGAL_GENERATION", "UNKNOWN_MEMBER_ID"]);

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
