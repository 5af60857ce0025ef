import type { PaceSlots } from "./pace-cursor.ts";
import type { SluiceError } from "./sluice-error.ts";

/** Amounts are doubles; above 2^53 integer token counts lose precision, so nothing larger is accepted. */
export const MAX_REQUEST_AMOUNT = Number.MAX_SAFE_INTEGER;

/** What a caller asks a QuotaBucket for. */
export interface QuotaRequest {
  /** Idempotency key; "" makes the request non-idempotent. */
  readonly requestId: string;
  readonly clientId: string;
  readonly amount: number;
  /** Lag priority: smaller is served first inside its class; 0 = no information yet. */
  readonly timestampMs: number;
  /** Requested class; "" or unknown → `default`. */
  readonly classId: string;
  /** Absolute time after which the request stops waiting (and keeps its place for a grace period). */
  readonly deadlineAt: number | null;
}

export type Admission =
  /** Waiting; it settles through `poll`. */
  | { readonly kind: "queued"; readonly requestId: string }
  /** The same id already waits; both settle together and the quota is granted once. */
  | { readonly kind: "joined"; readonly requestId: string }
  /** The same id had been detached; it is back at its original place. */
  | { readonly kind: "reattached"; readonly requestId: string }
  /** Settled at once: amount 0, or a retry of a request already granted (answered, not granted again). */
  | { readonly kind: "granted"; readonly requestId: string; readonly amount: number; readonly waitedMs: number; readonly pace?: PaceSlots }
  | { readonly kind: "refused"; readonly requestId: string; readonly error: SluiceError };

export type Settlement =
  /** `pace`: on a smooth throttler, the slots of the granted units (docs/design.md §11.1). */
  | { readonly kind: "granted"; readonly requestId: string; readonly amount: number; readonly waitedMs: number; readonly pace?: PaceSlots }
  | { readonly kind: "timed_out"; readonly requestId: string; readonly error: SluiceError };
