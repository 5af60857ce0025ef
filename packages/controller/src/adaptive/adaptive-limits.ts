import type { Clock } from "@sluice/core";
import type { AdaptiveSpec, ThrottlerSpec } from "@sluice/spec";
import type { ThrottlerUsage } from "./adaptive-law.ts";
import { AdaptiveLimitLoop, type AdaptiveSnapshot } from "./adaptive-loop.ts";
import { loadSourceOf, type LoadSource, type LoadSpec } from "./load-source.ts";
import type { PersistedAdaptive } from "@sluice/failover-ports";

/** The counters of a bucket the loop measures use from. */
export interface BucketUsageSample {
  /** Units granted since the bucket started (monotone). */
  readonly granted: number;
  /** Units given back since the bucket started (monotone). */
  readonly released: number;
  readonly pendingRequests: number;
  /** Units held now (concurrency throttlers), null for a rate throttler. */
  readonly inUse: number | null;
}

export interface AdaptiveLimitsOptions {
  readonly clock: Clock;
  readonly log: (line: string) => void;
  /** Builds a throttler's load source. Default: Prometheus over HTTP, or the module resolved against `baseDir`. */
  readonly sourceOf?: ((throttlerId: string, load: LoadSpec) => LoadSource) | undefined;
  readonly baseDir?: string | undefined;
  /** Puts a limit in force on a throttler's bucket. */
  readonly setLimit: (throttlerId: string, limit: number) => void;
  /** The throttler's counters now; undefined when it is gone. */
  readonly sample: (throttlerId: string) => BucketUsageSample | undefined;
  /**
   * The use of a throttler measured elsewhere over the last `elapsedMs` (a keyed throttler's keys,
   * since the last call); undefined: measure it from `sample`.
   */
  readonly usage?: ((throttlerId: string, elapsedMs: number) => ThrottlerUsage | undefined) | undefined;
  /** Called after every decision of a loop (a failover leader persists the loops' state then). */
  readonly decided?: (() => void) | undefined;
}

/** One adaptive loop per throttler that declares `adaptive`, kept in step with the dynamic_spec. */
export class AdaptiveLimits {
  private readonly loops = new Map<string, { loop: AdaptiveLimitLoop; spec: AdaptiveSpec }>();

  constructor(private readonly options: AdaptiveLimitsOptions) {}

  /** The limit the bucket of this throttler should run at once `throttler` is in force; null when it is not adaptive. */
  limitFor(throttlerId: string, throttler: ThrottlerSpec): number | null {
    const adaptive = throttler.adaptive;
    if (!adaptive) return null;
    const running = this.loops.get(throttlerId);
    return running ? running.loop.inForceAfter(adaptive) : AdaptiveLimitLoop.initialInForce(adaptive);
  }

  /** Starts, reconfigures and stops loops so that exactly the adaptive throttlers of `throttlers` have one. */
  sync(throttlers: Readonly<Record<string, ThrottlerSpec>>): void {
    for (const [id, running] of this.loops) {
      if (throttlers[id]?.adaptive) continue;
      running.loop.close();
      this.loops.delete(id);
      this.options.log(`adaptive ${id}: stopped (the throttler ${throttlers[id] ? "has a fixed limit now" : "was removed"})`);
    }
    for (const [id, throttler] of Object.entries(throttlers)) {
      const adaptive = throttler.adaptive;
      if (!adaptive) continue;
      const running = this.loops.get(id);
      if (running) {
        if (JSON.stringify(running.spec) === JSON.stringify(adaptive)) continue;
        running.loop.reconfigure(adaptive, this.sourceOf(id, adaptive.load));
        running.spec = adaptive;
        continue;
      }
      const loop = new AdaptiveLimitLoop({
        throttlerId: id,
        spec: adaptive,
        source: this.sourceOf(id, adaptive.load),
        clock: this.options.clock,
        usage: this.usageMeter(id),
        apply: (limit) => this.options.setLimit(id, limit),
        log: this.options.log,
        wholeUnits: throttler.kind === "concurrency",
        ...(this.options.decided ? { decided: this.options.decided } : {}),
      });
      this.loops.set(id, { loop, spec: adaptive });
      loop.start();
    }
  }

  snapshot(throttlerId: string): AdaptiveSnapshot | undefined {
    return this.loops.get(throttlerId)?.loop.snapshot();
  }

  /** Every loop's state, for a failover leader to persist (persisted-adaptive.ts). */
  persisted(): Record<string, PersistedAdaptive> {
    return Object.fromEntries([...this.loops].map(([id, { loop }]) => [id, loop.persisted()]));
  }

  /** Restores the loops that still exist from a predecessor's state; returns the limits they go on from. */
  restore(states: Readonly<Record<string, PersistedAdaptive>>): Record<string, number> {
    const restored: [string, number][] = [];
    for (const [id, state] of Object.entries(states)) {
      const running = this.loops.get(id);
      if (!running) continue;
      running.loop.restore(state);
      restored.push([id, running.loop.limitInForce]);
    }
    return Object.fromEntries(restored);
  }

  close(): void {
    for (const { loop } of this.loops.values()) loop.close();
    this.loops.clear();
  }

  private sourceOf(id: string, load: LoadSpec): LoadSource {
    return this.options.sourceOf ? this.options.sourceOf(id, load) : loadSourceOf(load, { baseDir: this.options.baseDir });
  }

  /**
   * Use over the last interval. A rate throttler: units granted net of units given back (a
   * prefetching client returns what it did not use), per second. A concurrency throttler: the
   * units in use now. "queued" when a request waits now.
   */
  private usageMeter(id: string): (elapsedMs: number) => ThrottlerUsage {
    let previous = this.options.sample(id);
    return (elapsedMs) => {
      const measured = this.options.usage?.(id, elapsedMs);
      if (measured) return measured;
      const now = this.options.sample(id);
      const before = previous;
      previous = now;
      const queued = (now?.pendingRequests ?? 0) > 0;
      if (now && now.inUse !== null) return { use: now.inUse, queued };
      if (!now || !before || elapsedMs <= 0) return { use: 0, queued };
      const net = now.granted - before.granted - (now.released - before.released);
      return { use: Math.max(0, net) / (elapsedMs / 1000), queued };
    };
  }
}
