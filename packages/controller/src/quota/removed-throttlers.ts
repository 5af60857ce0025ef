import { SluiceError } from "@sluice/core";

/**
 * How many removals the controller remembers. A request for an id removed longer ago than that is
 * answered UNKNOWN_THROTTLER (retriable) instead, which a client rides out until its dynamic_spec
 * watch tells it the throttler is gone; the bound only keeps a controller that churns through
 * generated throttler ids from growing without end.
 */
export const REMEMBERED_REMOVALS = 1024;

/**
 * The throttlers that reconfigurations of this controller removed, with the dynamic_spec version
 * that removed each. It lets the controller tell a caller "removed in version N" (final:
 * THROTTLER_REMOVED) apart from an id it never had (UNKNOWN_THROTTLER, retriable: a controller
 * that just restarted does not know what its predecessor was told). A controller restart forgets
 * it, on purpose: the restarted one cannot know, and says so with UNKNOWN_THROTTLER.
 */
export class RemovedThrottlers {
  private readonly removedIn = new Map<string, number>();

  constructor(private readonly capacity = REMEMBERED_REMOVALS) {}

  /** `id` was removed by the update to `version`. */
  remember(id: string, version: number): void {
    this.removedIn.delete(id); // re-inserted at the end: the oldest removal goes first
    this.removedIn.set(id, version);
    while (this.removedIn.size > this.capacity) {
      const oldest = this.removedIn.keys().next();
      if (oldest.done) break;
      this.removedIn.delete(oldest.value);
    }
  }

  /** `id` is declared again. */
  forget(id: string): void {
    this.removedIn.delete(id);
  }

  /** The refusal for a removed id, or null when it was not removed (as far as this controller remembers). */
  errorFor(id: string, currentVersion: number): SluiceError | null {
    const version = this.removedIn.get(id);
    return version === undefined ? null : removedError(id, version, currentVersion);
  }
}

/** What waiters on a removed throttler, and later requests for it, are told. */
export function removedError(id: string, removedInVersion: number, currentVersion: number): SluiceError {
  const now = currentVersion === removedInVersion ? "" : ` (now version ${currentVersion})`;
  return new SluiceError(
    "THROTTLER_REMOVED",
    `throttler ${JSON.stringify(id)} was removed from dynamic_spec in version ${removedInVersion}${now}; ` +
      "not retried: declare it again with `sluice reconfigure` to use it",
    { throttlerId: id, removedInVersion, version: currentVersion },
  );
}
