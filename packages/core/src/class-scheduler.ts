/**
 * Start-time fair queuing over quota classes (docs/design.md §9.2; the reference's
 * TWeightedFairQueueScheduler, ytflow.md §3.3). Pure and synchronous.
 *
 * Each class has a virtual time (VT). Among classes with pending requests the one with the smallest
 * (VT, head timestamp, class id) is served; the system VT becomes the start tag of the chunk being
 * served; a served chunk charges `amount / weight`. A class that wakes while others are active starts
 * at max(own VT, system VT), so it banks no credit for its idle time yet is served before the next
 * chunk of a long backlog (whose VT already moved past the start tag). When no class is active, all
 * VTs reset to 0. Long-run shares of backlogged classes are proportional to their weights.
 */
export const DEFAULT_CLASS = "default";

/** Past this, virtual times are shifted back toward 0 so floats keep their precision. */
const RENORMALIZATION_THRESHOLD = 1e12;

interface ClassState {
  weight: number;
  virtualTime: number;
  headTimestamp: number;
  active: boolean;
  /** False for a class dropped by reconfiguration: it drains its backlog, then disappears. */
  accepting: boolean;
}

export interface ClassView {
  readonly id: string;
  readonly weight: number;
  readonly virtualTime: number;
  readonly active: boolean;
  readonly accepting: boolean;
}

export class ClassScheduler {
  private readonly classes = new Map<string, ClassState>();
  private systemVirtualTime = 0;

  constructor(weights: Readonly<Record<string, number>> = {}) {
    this.reconfigure(weights);
  }

  /** Declares the configured classes; `default` always exists with weight 1. */
  reconfigure(weights: Readonly<Record<string, number>>): void {
    for (const [id, state] of this.classes) {
      if (id !== DEFAULT_CLASS) state.accepting = false;
    }
    for (const [id, weight] of Object.entries(weights)) {
      if (id === DEFAULT_CLASS) continue;
      const state = this.classes.get(id);
      if (state) {
        state.weight = weight;
        state.accepting = true;
      } else {
        this.classes.set(id, newState(weight, this.systemVirtualTime));
      }
    }
    const fallback = this.classes.get(DEFAULT_CLASS);
    if (fallback) fallback.weight = 1;
    else this.classes.set(DEFAULT_CLASS, newState(1, this.systemVirtualTime));
  }

  has(id: string): boolean {
    return this.classes.has(id);
  }

  isAccepting(id: string): boolean {
    return this.classes.get(id)?.accepting ?? false;
  }

  weightOf(id: string): number {
    return this.state(id).weight;
  }

  /** Marks a class as having pending requests, with the lag timestamp of its head request. */
  activate(id: string, headTimestamp: number): void {
    const state = this.state(id);
    if (!state.active) {
      if (this.anyActive()) state.virtualTime = Math.max(state.virtualTime, this.systemVirtualTime);
      state.active = true;
    }
    state.headTimestamp = headTimestamp;
  }

  deactivate(id: string): void {
    this.state(id).active = false;
    this.maybeReset();
  }

  /** The class to serve next, or null when none is active. Sets the system VT to its start tag. */
  select(): string | null {
    let bestId: string | null = null;
    let best: ClassState | undefined;
    for (const [id, state] of this.classes) {
      if (!state.active) continue;
      if (best === undefined || bestId === null || precedes(state, id, best, bestId)) {
        best = state;
        bestId = id;
      }
    }
    if (best === undefined) return null;
    this.systemVirtualTime = best.virtualTime;
    this.maybeRenormalize();
    return bestId;
  }

  /** Charges a served chunk: `amount / weight` of virtual time. Returns the charge. */
  charge(id: string, amount: number, weight = this.weightOf(id)): number {
    const delta = amount / weight;
    this.chargeVirtualTime(id, delta);
    return delta;
  }

  /**
   * Gives back the virtual time of `amount` units a class returned unused (ReleaseQuota), so that a
   * class whose clients hand back what they prefetched is not served less than its weight for it.
   * Never below the system virtual time: returned quota cancels a charge, it does not bank credit
   * for later. Returns the virtual time given back.
   */
  refund(id: string, amount: number): number {
    const state = this.classes.get(id);
    if (!state || amount <= 0) return 0;
    const delta = Math.min(amount / state.weight, Math.max(0, state.virtualTime - this.systemVirtualTime));
    if (delta > 0) this.chargeVirtualTime(id, -delta);
    return delta;
  }

  /** Adds (or, for a refund, subtracts) virtual time exactly as recorded at grant time. */
  chargeVirtualTime(id: string, delta: number): void {
    this.state(id).virtualTime += delta;
    this.maybeRenormalize();
    this.maybeReset();
  }

  /** Erases a retired class once it has drained. Returns whether it was removed. */
  removeIfRetired(id: string): boolean {
    const state = this.classes.get(id);
    if (!state || id === DEFAULT_CLASS || state.accepting || state.active) return false;
    this.classes.delete(id);
    return true;
  }

  get systemTime(): number {
    return this.systemVirtualTime;
  }

  views(): ClassView[] {
    return [...this.classes].map(([id, s]) => ({
      id,
      weight: s.weight,
      virtualTime: s.virtualTime,
      active: s.active,
      accepting: s.accepting,
    }));
  }

  private state(id: string): ClassState {
    const state = this.classes.get(id);
    if (!state) throw new Error(`quota class "${id}" is not known to the scheduler`);
    return state;
  }

  private anyActive(): boolean {
    for (const state of this.classes.values()) if (state.active) return true;
    return false;
  }

  private maybeReset(): void {
    if (this.anyActive()) return;
    this.systemVirtualTime = 0;
    for (const state of this.classes.values()) state.virtualTime = 0;
  }

  private maybeRenormalize(): void {
    if (this.systemVirtualTime <= RENORMALIZATION_THRESHOLD) return;
    const shift = this.systemVirtualTime;
    for (const state of this.classes.values()) {
      state.virtualTime = state.active ? state.virtualTime - shift : 0;
    }
    this.systemVirtualTime = 0;
  }
}

function newState(weight: number, virtualTime: number): ClassState {
  return { weight, virtualTime, headTimestamp: 0, active: false, accepting: true };
}

function precedes(a: ClassState, aId: string, b: ClassState, bId: string): boolean {
  if (a.virtualTime !== b.virtualTime) return a.virtualTime < b.virtualTime;
  if (a.headTimestamp !== b.headTimestamp) return a.headTimestamp < b.headTimestamp;
  return aId < bId;
}
