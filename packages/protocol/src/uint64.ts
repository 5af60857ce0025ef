/**
 * A JS number as a proto uint64 field carries it: a whole number of milliseconds, never negative.
 * Both transports apply this, so a fractional or negative value means the same in memory as on the
 * wire (protobuf would otherwise truncate, or wrap a negative to 2^64 − n). Non-finite → 0, which
 * every uint64 field here reads as "no information".
 */
export function toUint64(value: number): number {
  if (!Number.isFinite(value) || value <= 0) return 0;
  return Math.min(Math.floor(value), Number.MAX_SAFE_INTEGER);
}
