import { systemClock, type Clock } from "@sluice/core";

/**
 * Sluice reads every deadline (`CallOptions.deadlineAt`, `CallContext.deadlineAt`) on its clock:
 * `systemClock`, which is `performance.timeOrigin + performance.now()` — monotonic, fixed at process
 * start. grpc-js reads deadlines against `Date.now()`, which NTP may step or slew after the process
 * started, so the two drift apart (by seconds after a clock step). Mixing them made a call's
 * deadline land early or late by that drift: a wall clock stepped 60 s ahead failed every
 * RequestQuota at once with QUOTA_TIMEOUT. Only the remaining time crosses between the two bases;
 * that is also all that travels on the wire (grpc-timeout is relative).
 */

/** A deadline on `clock` as the Date-based epoch ms that grpc-js expects. */
export function toGrpcDeadline(deadlineAt: number, clock: Clock = systemClock, wallNow: number = Date.now()): number {
  return wallNow + (deadlineAt - clock.now());
}

/** grpc-js's Date-based deadline of a received call on `clock`, or null for none (Infinity). */
export function fromGrpcDeadline(deadline: Date | number, clock: Clock = systemClock, wallNow: number = Date.now()): number | null {
  const wallMs = deadline instanceof Date ? deadline.getTime() : deadline;
  if (!Number.isFinite(wallMs)) return null;
  return clock.now() + (wallMs - wallNow);
}
