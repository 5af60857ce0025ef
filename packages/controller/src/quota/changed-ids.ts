// Which ids (a keyed throttler's keys, a keyed concurrency throttler's lease ids) may have a persisted
// record other than the one a failover leader last worked out (docs/design.md §5.3, §11.4): the ids
// a grant, a release, a lease, a parking, a forgetting or a restore touched since. A leader's write
// then looks at those ids only, not at every key remembered. Nothing is kept until someone takes the
// changes (a controller that is not a failover leader never does): until then, and after a change
// of every id (a reconfiguration), the answer is "every id".

export class ChangedIds {
  private tracking = false;
  private everything = true;
  private ids = new Set<string>();

  /** Whether a leader takes the changes (marks are kept only then). */
  get tracked(): boolean {
    return this.tracking;
  }

  /** What `id` would persist may have changed. */
  mark(id: string): void {
    if (this.tracking && !this.everything) this.ids.add(id);
  }

  /** Every id may have changed (a new config, a new limit). */
  markAll(): void {
    this.everything = true;
    this.ids.clear();
  }

  /**
   * The ids marked since the last call, or null for every id (the first call, or after markAll).
   * Ids that `busy` says may still change on their own (a waiter a timer will grant) stay marked
   * for the next call; `candidates` lists the ids that can be busy at all, for the null answer.
   */
  take(busy?: (id: string) => boolean, candidates?: () => Iterable<string>): ReadonlySet<string> | null {
    const taken = this.everything ? null : this.ids;
    this.tracking = true;
    this.everything = false;
    this.ids = new Set();
    if (busy) for (const id of taken ?? candidates?.() ?? []) if (busy(id)) this.ids.add(id);
    return taken;
  }
}
