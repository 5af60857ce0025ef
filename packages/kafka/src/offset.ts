// Kafka offsets are 64-bit; they travel as decimal strings and are compared as bigints.

const DECIMAL = /^(0|[1-9][0-9]*)$/;

/** The offset after `offset`. */
export function offsetAfter(offset: string): string {
  return (BigInt(offset) + 1n).toString();
}

/** True when `offset` is a decimal integer ≥ 0 that fits Kafka's int64. */
export function isValidOffset(offset: string): boolean {
  return DECIMAL.test(offset) && BigInt(offset) <= 0x7fff_ffff_ffff_ffffn;
}

export function offsetLessThan(a: string, b: string): boolean {
  return BigInt(a) < BigInt(b);
}
