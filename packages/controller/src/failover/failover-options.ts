import type { Tracer } from "@opentelemetry/api";
import type { Clock } from "@sluice/core";
import type { DynamicSpec } from "@sluice/spec";
import type { ControllerOptions } from "../quota/controller.ts";
import type { ControllerElection, ControllerStateStore } from "@sluice/failover-ports";

/** What one controller of a failover group (failover-controller.ts) is built from. */
export interface FailoverControllerOptions {
  readonly pipeline: string;
  /** The spec file's dynamic_spec: in force only when the state topic holds none yet. */
  readonly dynamicSpec: DynamicSpec;
  readonly computations: readonly string[];
  /** Epoch-ms clock: persisted balances carry its time, read by the next leader on its own. */
  readonly clock: Clock;
  /** host:port clients reach this controller at; the leader announces it, followers name it. */
  readonly address: string;
  readonly store: ControllerStateStore;
  readonly election: ControllerElection;
  /** How long a confirmed heartbeat lets the leader serve; below the session timeout (see LeaderLease). */
  readonly leaseMs: number;
  readonly log?: (line: string) => void;
  readonly tracer?: Tracer;
  readonly detachedGraceMs?: number;
  /** Directory an adaptive throttler's `load.module` is resolved against (the spec file's). */
  readonly baseDir?: string;
  /** Builds an adaptive throttler's load source (tests); default: Prometheus over HTTP or the module. */
  readonly loadSourceOf?: ControllerOptions["loadSourceOf"];
  /** Pause between attempts to read the state when taking over fails. Default 1000 ms. */
  readonly retryDelayMs?: number;
}
