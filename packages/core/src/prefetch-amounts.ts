import { SluiceError } from "./sluice-error.ts";

/**
 * Amounts are doubles and refills are fractional, so sums drift by ~1e-14. A comparison that must
 * hold exactly (a pool of 99.99999999999999 for a request of 100) would leave a caller waiting
 * forever with nothing in flight; quantities within this relative tolerance count as equal.
 */
export const TOLERANCE = 1e-9;

export function fits(amount: number, available: number): boolean {
  // Relative to what is there, so an infinite amount never fits.
  return amount <= available + TOLERANCE * Math.max(1, Math.abs(available));
}

/** A running sum that should be back at zero, without the float residue of its additions. */
export function settleToZero(value: number): number {
  return Math.abs(value) < TOLERANCE ? 0 : value;
}

export function validAmount(amount: number): boolean {
  return typeof amount === "number" && Number.isFinite(amount) && amount >= 0;
}

export function invalidAmount(name: string, amount: number): SluiceError {
  return new SluiceError("INVALID_AMOUNT", `amount must be a finite number >= 0, got ${String(amount)} (throttler "${name}")`, {
    throttlerId: name,
    amount,
  });
}
