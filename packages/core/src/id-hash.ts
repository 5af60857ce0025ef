/**
 * A 64-bit hash of a request id, as two 32-bit halves from two independent mixes over its UTF-16
 * code units. RememberedGrants keeps only this hash of a granted id, never the string (so the GC
 * has nothing per id to trace); two distinct ids with the same 64 bits are taken for one id. With
 * n ids remembered, a new id matches one of them with probability ≈ n / 2^64 (5.4 × 10⁻¹⁴ at
 * n = 1,000,000), provided the halves behave as independent uniform hashes — which is why both
 * states are 32 bits wide, mixed differently (an FNV-1a-style xor-multiply and a
 * multiply-rotate-add step) and each finished with an avalanche so that every bit of the code
 * units reaches every bit of the result.
 */

/**
 * Writes the hash of `id` into `out[0]` (high half) and `out[1]` (low half, also the table position).
 * `seedHigh`/`seedLow` start the two states: the defaults for an id alone, or `scopeSeedOf(scope)`'s
 * for an id within a scope (a keyed throttler's key: one table holds every key's ids).
 */
export type IdHasher = (id: string, out: Uint32Array, seedHigh?: number, seedLow?: number) => void;

/** The states an id alone starts from (IdHasher's default seeds). */
export const UNSCOPED_HIGH = 0x811c9dc5;
export const UNSCOPED_LOW = 0x2545f491;

export const hashRequestId: IdHasher = (id, out, seedHigh = UNSCOPED_HIGH, seedLow = UNSCOPED_LOW) => {
  const length = id.length;
  // Seeding with the length keeps ids that are prefixes of one another apart from the first step.
  let a = (seedHigh ^ length) | 0;
  let b = (seedLow ^ Math.imul(length, 0x9e3779b1)) | 0;
  for (let i = 0; i < length; i += 1) {
    const unit = id.charCodeAt(i);
    // FNV-1a's xor-then-multiply by its 32-bit prime, over a 16-bit unit instead of a byte.
    a = Math.imul(a ^ unit, 0x01000193);
    // A different family: scramble the unit, fold it in, rotate, multiply-add.
    let k = Math.imul(unit, 0xcc9e2d51);
    k = Math.imul((k << 15) | (k >>> 17), 0x1b873593);
    b ^= k;
    b = (Math.imul((b << 13) | (b >>> 19), 5) + 0xe6546b64) | 0;
  }
  out[0] = avalanche(a);
  out[1] = avalanche(b);
};

/**
 * The seeds of ids within `scope`: the two states after the scope's code units and then SCOPE_END
 * (which no code unit equals, so that no other split of the same units into scope and id gives the
 * same input), by the same steps as an id's. Worked out once per scope: hashing an id then reads
 * the id alone.
 */
export function scopeSeedOf(scope: string): readonly [high: number, low: number] {
  let a = UNSCOPED_HIGH | 0;
  let b = UNSCOPED_LOW | 0;
  for (let i = 0; i <= scope.length; i += 1) {
    const unit = i < scope.length ? scope.charCodeAt(i) : SCOPE_END;
    a = Math.imul(a ^ unit, 0x01000193);
    let k = Math.imul(unit, 0xcc9e2d51);
    k = Math.imul((k << 15) | (k >>> 17), 0x1b873593);
    b ^= k;
    b = (Math.imul((b << 13) | (b >>> 19), 5) + 0xe6546b64) | 0;
  }
  return [a, b];
}

/** Folded in after a scope's code units: 2^16, which no UTF-16 code unit equals. */
const SCOPE_END = 0x10000;

/**
 * Spreads every input bit over the whole word (xor-shift-multiply, twice). FNV's multiply carries
 * bits upward only, so without this the low bits (the table position) would barely depend on the
 * high bits of the code units.
 */
function avalanche(h: number): number {
  h ^= h >>> 16;
  h = Math.imul(h, 0x7feb352d);
  h ^= h >>> 15;
  h = Math.imul(h, 0x846ca68b);
  h ^= h >>> 16;
  return h >>> 0;
}
