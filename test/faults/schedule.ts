// The nemesis's schedule (docs/design.md §5.3): a list of faults drawn from one seed, so `--seed N` replays
// the same faults with the same parameters in the same order. The first five steps are the five
// fault kinds in a seeded order, so any schedule of five steps or more hits every kind once; the
// rest are drawn at random.
import { FAULT_KINDS, type FaultKind } from "./history.ts";

export interface FaultStep {
  readonly kind: FaultKind;
  /** Quiet time before the fault, under load. */
  readonly quietMs: number;
  /** kill-leader: how long before a replacement controller starts on the same port. */
  readonly restartAfterMs: number;
  /** pause-leader: how long SIGSTOPped (always past the 6 s session timeout). */
  readonly pauseMs: number;
  /** restart-broker: SIGKILL (a crash) or SIGTERM (a controlled shutdown), and the time it stays down. */
  readonly brokerSignal: "SIGKILL" | "SIGTERM";
  readonly downMs: number;
  /** cut-connection: whose broker connection is cut (the leader's or a follower's), and for how long. */
  readonly cutTarget: "leader" | "follower";
  readonly cutMs: number;
}

/** The session timeout the harness's controllers run with (spec kafka.session_timeout). */
export const SESSION_TIMEOUT_MS = 6_000;
/** About what one step costs, quiet time, fault and recovery, on this 2-core machine. */
export const STEP_BUDGET_MS = 36_000;

/** A small xorshift generator in [0, 1): the same seed gives the same schedule on any machine. */
export function seededRandom(seed: number): () => number {
  let state = seed >>> 0 || 1;
  return () => {
    state ^= state << 13;
    state ^= state >>> 17;
    state ^= state << 5;
    return (state >>> 0) / 2 ** 32;
  };
}

export interface ScheduleOptions {
  readonly seed: number;
  readonly minutes: number;
  /** Only these kinds (a short CI schedule); default every kind. */
  readonly kinds?: readonly FaultKind[];
}

export function faultSchedule(options: ScheduleOptions): FaultStep[] {
  const random = seededRandom(options.seed);
  const between = (low: number, high: number) => Math.round(low + random() * (high - low));
  const kinds = options.kinds && options.kinds.length > 0 ? [...options.kinds] : [...FAULT_KINDS];
  // Fisher–Yates with the seeded generator: every kind once, in a seeded order.
  for (let i = kinds.length - 1; i > 0; i--) {
    const j = Math.floor(random() * (i + 1));
    [kinds[i], kinds[j]] = [kinds[j] as FaultKind, kinds[i] as FaultKind];
  }
  const count = Math.max(1, Math.round((options.minutes * 60_000) / STEP_BUDGET_MS));
  const steps: FaultStep[] = [];
  for (let i = 0; i < count; i++) {
    const kind = i < kinds.length ? (kinds[i] as FaultKind) : (kinds[Math.floor(random() * kinds.length)] as FaultKind);
    steps.push({
      kind,
      quietMs: between(4_000, 10_000),
      restartAfterMs: between(1_000, 8_000),
      pauseMs: between(SESSION_TIMEOUT_MS + 2_000, SESSION_TIMEOUT_MS + 8_000),
      brokerSignal: random() < 0.5 ? "SIGKILL" : "SIGTERM",
      downMs: between(1_000, 6_000),
      cutTarget: random() < 0.7 ? "leader" : "follower",
      cutMs: between(SESSION_TIMEOUT_MS + 2_000, SESSION_TIMEOUT_MS + 9_000),
    });
  }
  return steps;
}

/** One line per step, printed before the run so a log shows what was planned. */
export function describeStep(step: FaultStep, index: number): string {
  const what: Record<FaultKind, string> = {
    "kill-leader": `SIGKILL the leader, a replacement after ${step.restartAfterMs} ms`,
    "pause-leader": `SIGSTOP the leader for ${step.pauseMs} ms, then SIGCONT`,
    "restart-broker": `${step.brokerSignal} the broker, down ${step.downMs} ms, start it again`,
    "all-down-group-deleted": "stop every controller, delete the election group, start them again",
    "cut-connection": `cut the ${step.cutTarget}'s broker connection (Toxiproxy) for ${step.cutMs} ms`,
  };
  return `#${index + 1} after ${step.quietMs} ms quiet: ${step.kind}: ${what[step.kind]}`;
}
