/**
 * An AbortController that also aborts when any of `parents` does, until `dispose()`.
 *
 * `AbortSignal.any` does the same, but Node 20 tracks every such signal with weak references and a
 * finalization registry; made once per Process iteration it showed up as a tenth of a busy worker's
 * CPU, most of it in the garbage collector. Plain listeners, removed when the work is done, cost
 * almost nothing.
 */
export class LinkedAbort {
  private readonly controller = new AbortController();
  private readonly onAbort: (this: AbortSignal) => void;

  constructor(private readonly parents: readonly AbortSignal[]) {
    const controller = this.controller;
    this.onAbort = function (this: AbortSignal) {
      controller.abort(this.reason);
    };
    for (const parent of parents) {
      if (parent.aborted) {
        controller.abort(parent.reason);
        return;
      }
    }
    for (const parent of parents) parent.addEventListener("abort", this.onAbort, { once: true });
  }

  get signal(): AbortSignal {
    return this.controller.signal;
  }

  abort(reason: unknown): void {
    this.controller.abort(reason);
  }

  /** Stops following the parents (their listeners are removed); the signal keeps its state. */
  dispose(): void {
    for (const parent of this.parents) parent.removeEventListener("abort", this.onAbort);
  }
}
