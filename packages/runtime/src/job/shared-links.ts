import { LinkedAbort } from "./linked-abort.ts";

/** One link of a SharedLinks, with the number of batches that hold it now. */
export class SharedLink {
  users = 0;

  constructor(
    readonly source: AbortSignal,
    readonly link: LinkedAbort,
  ) {}

  get signal(): AbortSignal {
    return this.link.signal;
  }
}

/**
 * A job's abort links (LinkedAbort of the source's batch signal and the job's stop signal), shared by
 * the batches a source delivers under the same signal (one assignment of a partition) instead of
 * one per batch: Node makes an AbortSignal and its listeners at a cost comparable to the rest of an
 * unthrottled iteration. A link is replaced once it was aborted (or the source's signal changed), and
 * disposed when the last batch holding it leaves, so batches of an older assignment that still run
 * keep theirs.
 */
export class SharedLinks {
  private current: SharedLink | null = null;

  constructor(private readonly jobSignal: AbortSignal) {}

  enter(source: AbortSignal): SharedLink {
    let entry = this.current;
    if (entry === null || entry.source !== source || entry.signal.aborted) {
      if (entry !== null && entry.users === 0) entry.link.dispose();
      entry = new SharedLink(source, new LinkedAbort([source, this.jobSignal]));
      this.current = entry;
    }
    entry.users += 1;
    return entry;
  }

  leave(entry: SharedLink): void {
    entry.users -= 1;
    if (entry.users === 0 && entry !== this.current) entry.link.dispose();
  }

  /** The job stopped: the link nobody holds stops following its parents. */
  close(): void {
    if (this.current !== null && this.current.users === 0) this.current.link.dispose();
    this.current = null;
  }
}
