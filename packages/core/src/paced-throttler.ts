import { asSluiceError } from "./abort.ts";
import type { Clock } from "./clock.ts";
import { PacedWaitingCallers } from "./paced-waiting-callers.ts";
import { TOLERANCE, fits, invalidAmount, validAmount } from "./prefetch-amounts.ts";
import { PrefetchSizer } from "./prefetch-sizer.ts";
import type { PrefetchConfig, PrefetchStats } from "./prefetching-throttler.ts";
import { releaseSharedDispatchWindow, sharedDispatchWindow, type DispatchWindow } from "./dispatch-window.ts";
import { SharedWakeups } from "./shared-wakeups.ts";
import { SlotSchedule } from "./slot-schedule.ts";
import { SluiceError } from "./sluice-error.ts";
import { RESOLVED, type ThrottleOptions, type Throttler } from "./throttler.ts";

/**
 * Wake-ups for due slots are spaced between these shares of the slot expiry; the rest of the expiry
 * is left for the timer's own lateness on a busy machine (a unit older than the expiry is never
 * handed out, so the spacing decides how many units are lost to a late timer, never the window bound).
 * An event-loop wake-up costs CPU whatever it then does, so wake-ups are most of what a smooth
 * client costs, and spacing them wider costs fewer (docs/internals/measurements.md). The clients of one
 * process share their wake-ups (SharedWakeups), so this spacing holds for the process, not per client.
 */
const MIN_WAKE_SHARE_OF_EXPIRY = 1 / 3;
/**
 * While the process's timers fire on time, wake-ups are up to this share of the expiry apart (25 ms
 * at a 1 s period, half the wake-ups of 1/3): at most this share's worth of slots reach callers
 * together (about 25 units at 1,000 units/s).
 */
const MAX_WAKE_SHARE_OF_EXPIRY = 2 / 3;
/**
 * Kept of the expiry for lateness: this many times how late the process's timers fired lately, near
 * the worst (SharedWakeups.recentLatenessMs), plus LATENESS_FLOOR_MS for what runs between the
 * timer and the caller (the other clients woken first, the answer of an RPC read in between).
 */
const LATENESS_FACTOR = 2;
const LATENESS_FLOOR_MS = 2;

/** The schedule of one answer, relative to when it arrived (RequestQuotaResponse pace fields). */
export interface PaceSchedule {
  /** The first unit's slot, this long after the answer arrived. */
  readonly startDelayMs: number;
  /** Spacing of the units; 0 = all at once (the controller does not pace this throttler). */
  readonly intervalMs: number;
  /**
   * At most this long passed between the controller's answer and its arrival here: the time from
   * sending the request to the answer's arrival, less the controller's own wait. Slots counted from
   * the arrival may be this late already, so they expire this much sooner. Absent = unknown (0).
   */
  readonly travelMs?: number;
  /**
   * How many units the answer holds, if fewer than asked: a controller answers at most one reach of
   * slots of the limit in force (a request sized for an earlier, larger limit is answered in part,
   * and the client asks again for the rest). Absent = all that was asked.
   */
  readonly granted?: number;
}

/** Where a smooth client gets its slots: the controller, over some transport. */
export interface PacedQuotaRemote {
  /** Resolves once `amount` was granted, with the slots it was given; rejects with a SluiceError. */
  acquirePaced(amount: number, signal: AbortSignal): Promise<PaceSchedule>;
}

export interface PacedConfig extends PrefetchConfig {
  /** How long a unit nobody took stays usable after its slot (`slotExpiryMs(period)`). */
  readonly slotExpiryMs: number;
  /**
   * The window the throttler promises (`limit × period` units in `period`), when the limit is fixed:
   * the client then also holds back a unit while it would put more than `units` departures of its
   * own callers' calls in a closed window of `periodMs` plus `guardMs` (DispatchWindow).
   */
  readonly window?: {
    readonly units: number;
    readonly periodMs: number;
    readonly guardMs: number;
    /** The clients sharing one window (default: the throttler's name); a keyed throttler's key has its own. */
    readonly sharedAs?: string;
  };
}

/**
 * The client of a smooth throttler (docs/design.md §11.1). Like the prefetching client it asks the controller
 * for quota ahead of need — one request in flight while callers keep coming, sized so that requests
 * run at about one per request_period — but what an answer brings are *slots*: the client hands
 * unit i to a caller at its slot, never earlier, in FIFO order. A unit nobody waits for expires
 * shortly after its slot, and `release` gives nothing back: a slot is used at its time or lost, so
 * no client can ever hand out a burst of saved-up units.
 *
 * A caller of `throttle(n)` with n > 1 returns at the slot of its n-th unit (its earlier units are
 * kept for it meanwhile): n units then reach it at once, which a window counts at that instant.
 */
export class PacedThrottler implements Throttler {
  private readonly slots: SlotSchedule;
  /** This client's own departures (config.window), or null without a fixed limit. */
  private readonly departures: DispatchWindow | null;
  /** Departures recorded in the current turn of the event loop, moved to its end (Clock.afterTurn). */
  private turnDepartures: { at: number }[] = [];
  private readonly onTurnEnd = (): void => {
    const end = this.clock.now();
    for (const departure of this.turnDepartures) departure.at = Math.max(departure.at, end);
    this.turnDepartures = [];
  };
  private readonly waiting = new PacedWaitingCallers();
  private inFlight = 0;
  /** Sizes refills as the prefetching client does; `unbounded` is not passed on (paced refills never used that floor). */
  private readonly sizer: PrefetchSizer;
  private refills = 0;
  private refillFailures = 0;
  private expired = 0;
  /**
   * Slots expired since the latest answer landed: the callers did not keep up with a run, so asking
   * ahead of them would only waste slots other clients could have used. Until a run is used up
   * again, the client asks only for what callers wait for.
   */
  private wasting = false;
  /** When a caller last received units; a caller back within the slot expiry means a backlog. */
  private handedAt = Number.NEGATIVE_INFINITY;
  /** The spacing of the latest answer's slots. */
  private lastIntervalMs = 0;
  /**
   * Callers come back as soon as they are served (a job loop with a backlog): worth keeping one
   * request in flight ahead of them. Otherwise the client asks only for what callers wait for.
   */
  private backlogged = false;
  /** Last time a caller asked for quota: refills continue for a request_period after it. */
  private demandAt = Number.NEGATIVE_INFINITY;
  /** One timer for every paced client on this clock (a process's clients wake together). */
  private readonly wakeups: SharedWakeups;
  /** Called by the shared wake-ups; made once, not per wake-up. */
  private readonly onWake = (): void => {
    this.wokeAt = this.clock.now();
    this.satisfy();
  };
  /** Called when a caller joins or leaves the queue; made once, not per caller. */
  private readonly onQueueChanged = (): void => this.satisfy();
  /** When this client was last woken: the next wake-up is planned a spacing later (see armWake). */
  private wokeAt = Number.NEGATIVE_INFINITY;
  private retryPending = false;
  /** Aborts the request in flight alone (a retired client withdrawing it), not the client. */
  private withdraw: AbortController | null = null;
  private retiring = false;
  private closedWith: SluiceError | null = null;
  private readonly lifetime = new AbortController();
  /** The name of the dispatch window shared with the process's other clients of this throttler (or key). */
  private readonly windowName: string;

  constructor(
    private readonly config: PacedConfig,
    private readonly remote: PacedQuotaRemote,
    private readonly clock: Clock,
    private readonly name = "throttler",
  ) {
    this.slots = new SlotSchedule(config.slotExpiryMs);
    const window = config.window;
    this.windowName = window?.sharedAs ?? name;
    this.departures = window && window.units > 0 ? sharedDispatchWindow(clock, this.windowName, window.units, window.periodMs + window.guardMs) : null;
    this.wakeups = SharedWakeups.of(clock);
    const { targetRps, minPrefetchAmount, maxPrefetchAmount, windowMs } = config;
    this.sizer = new PrefetchSizer({ targetRps, minPrefetchAmount, maxPrefetchAmount, windowMs });
  }

  throttle(amount: number, options?: ThrottleOptions): Promise<void> {
    if (!validAmount(amount)) return Promise.reject(invalidAmount(this.name, amount));
    if (this.closedWith) return Promise.reject(this.closedWith);
    const now = this.clock.now();
    this.demandAt = now;
    // Back within a slot or two of the last run (or the expiry, at high rates): a job loop with a
    // backlog, whose next unit is worth asking for ahead. At a low limit a job's own work between
    // calls (an HTTP call on a loaded machine) takes longer than the expiry, yet its next slot is
    // that far away too: judged by the expiry alone, such a job never had a request in flight ahead
    // of it, and every slot it waited for started from an idle timeline.
    this.backlogged = now - this.handedAt <= this.config.slotExpiryMs + 2 * this.lastIntervalMs;
    if (this.waiting.count === 0) {
      this.expire(now);
      if (fits(amount, this.slots.available(now)) && this.mayDepart(amount, now)) {
        this.slots.take(amount, now);
        this.departed(amount, now);
        this.handedAt = now;
        this.maybeRefill(now);
        return RESOLVED;
      }
    }
    return this.enqueue(amount, options?.signal);
  }

  tryAcquire(amount: number): boolean {
    if (!validAmount(amount) || this.closedWith) return false;
    const now = this.clock.now();
    this.demandAt = now;
    if (this.waiting.count === 0) {
      this.expire(now);
      if (fits(amount, this.slots.available(now)) && this.mayDepart(amount, now)) {
        this.slots.take(amount, now);
        this.departed(amount, now);
        this.maybeRefill(now);
        return true;
      }
    }
    this.maybeRefill(now);
    return false;
  }

  /**
   * Nothing goes back: a slot already given out must not be given out again, or the units released
   * would reach callers a second time within the window.
   */
  release(amount: number): void {
    if (!validAmount(amount)) throw invalidAmount(this.name, amount);
  }

  get isClosed(): boolean {
    return this.closedWith !== null;
  }

  stats(): PrefetchStats & { readonly expired: number; readonly upcoming: number } {
    const now = this.clock.now();
    return {
      available: this.slots.available(now),
      inFlight: this.inFlight,
      queuedRequests: this.waiting.count,
      queuedAmount: this.waiting.queuedAmount,
      prefetchAmount: this.sizer.prefetchAmount,
      refills: this.refills,
      refillFailures: this.refillFailures,
      returned: 0,
      expired: this.expired,
      upcoming: this.slots.upcoming(now),
    };
  }

  /** Serves the callers already waiting, then closes (a reconfiguration replaced this client). */
  retire(): void {
    this.retiring = true;
    this.maybeFinishRetiring();
    if (this.closedWith || this.inFlight === 0) return;
    // The request in flight was sized for the old config (a new limit may stretch it over seconds
    // of slots): withdraw it and ask for just what the callers left here wait for.
    const now = this.clock.now();
    const needed = this.waiting.queuedAmount - this.slots.available(now) - this.slots.upcoming(now);
    if (this.inFlight <= needed + TOLERANCE) return;
    this.withdraw?.abort(new SluiceError("CANCELLED", `${this.name}: request withdrawn after reconfiguration`));
    this.withdraw = null;
    this.inFlight = 0;
    this.maybeRefill(now);
  }

  /**
   * Fails waiting callers with CANCELLED (or with the error given: say, the throttler was removed)
   * and drops the slots held. Idempotent.
   */
  close(reason: string | SluiceError = "the throttler client was closed"): void {
    if (this.closedWith) return;
    this.closedWith = typeof reason === "string" ? new SluiceError("CANCELLED", `${this.name}: ${reason}`, { throttlerId: this.name }) : reason;
    this.lifetime.abort(this.closedWith);
    this.wakeups.cancel(this);
    this.waiting.failAll(this.closedWith);
    this.slots.clear();
    if (this.departures) releaseSharedDispatchWindow(this.clock, this.windowName, this.departures, this.clock.now());
  }

  private enqueue(amount: number, signal: AbortSignal | undefined): Promise<void> {
    return this.waiting.add(amount, signal, `throttle(${amount}) on "${this.name}"`, this.onQueueChanged);
  }

  /** Hands due slots to waiting callers in FIFO order, then sleeps until the head's slot comes. */
  private satisfy(): void {
    if (this.closedWith) return;
    const now = this.clock.now();
    for (let head = this.waiting.front(); head; head = this.waiting.front()) {
      // A unit-sized caller takes only fresh slots; a larger one keeps what it collected so far.
      // Slots that expired with a caller waiting were lost to lateness (a busy event loop), not to
      // a lack of demand: the client keeps asking ahead (see `wasting`).
      if (head.amount <= 1 + TOLERANCE) this.expire(now, { callerWaited: true });
      if (!fits(head.amount, this.slots.available(now)) || !this.mayDepart(head.amount, now)) break;
      this.slots.take(head.amount, now);
      this.departed(head.amount, now);
      this.handedAt = now;
      this.waiting.serveHead(head);
    }
    this.waiting.compact();
    this.maybeRefill(now);
    this.armWake(now);
    this.maybeFinishRetiring();
  }

  private armWake(now: number): void {
    const head = this.waiting.count > 0 ? this.waiting.firstLive() : undefined;
    const slotDue = head ? this.slots.timeWhenAvailable(head.amount, now) : null;
    // Nobody to wake for (or nothing held yet): a wake-up already asked for is left to come and find
    // nothing, which is cheaper than cancelling it — the caller just served is usually back at once.
    if (slotDue === null || !head) return;
    // Held back by this client's own departures (a stall made an earlier call leave late): woken
    // when the window lets the head out; its slot may expire meanwhile, never go out early.
    const due = this.departures ? Math.max(slotDue, this.departures.whenAdmits(head.amount, now)) : slotDue;
    // A process waking once per slot (1,000 times a second at 1,000 units/s) spends most of its CPU
    // on the wake-ups themselves. A unit may reach its caller up to the slot expiry after its slot
    // (the window bound allows for it), so wake-ups are spaced by what the expiry leaves after the
    // lateness the process's timers showed lately, and each hands out every slot that came
    // meanwhile: 12.5–25 ms at a 1 s period, about 12–25 units at once at 1,000/s.
    const expiryMs = Math.min(this.config.slotExpiryMs, this.slots.shortestExpiryMs() ?? this.config.slotExpiryMs);
    const keptForLateness = LATENESS_FLOOR_MS + LATENESS_FACTOR * this.wakeups.recentLatenessMs;
    const spacingMs = Math.min(expiryMs * MAX_WAKE_SHARE_OF_EXPIRY, Math.max(expiryMs * MIN_WAKE_SHARE_OF_EXPIRY, expiryMs - keptForLateness));
    const at = Math.max(due, this.wokeAt + spacingMs);
    // Woken no sooner than the head's slot (never early) and no later than `at`: another client's
    // wake-up in between serves this one too, at no lateness beyond what its own timer would add.
    // The shared wake-ups hold no timer for a closed client (close cancels), so none holds the
    // process open until a far slot.
    this.wakeups.schedule(this, due, at, this.onWake);
  }

  /**
   * Keeps one request in flight while callers keep coming and less than one refill is ahead of
   * them: the controller holds it until its slots are near, so a backlogged client never leaves a
   * gap in the timeline, and an idle one stops asking after a request_period.
   */
  private maybeRefill(now: number): void {
    if (this.closedWith || this.inFlight > 0 || this.retryPending) return;
    if (this.retiring && this.waiting.count === 0) return;
    const periodMs = 1000 / this.config.targetRps;
    const askAhead = this.backlogged && !this.wasting && !this.retiring;
    if (this.waiting.count === 0 && (!askAhead || now - this.demandAt > periodMs)) return;
    const held = this.slots.available(now) + this.slots.upcoming(now);
    const ahead = held - this.waiting.queuedAmount;
    this.sizer.update(now);
    // Waiting callers covered up to the float residue of fractional runs count as covered: asking for
    // a residue (1e-12 units) would be answered at once with a run too small to keep, and asked again
    // at once — an RPC storm at one instant (found by the property test with random seeds).
    const covered = fits(this.waiting.queuedAmount, held);
    if (covered && (!askAhead || ahead >= this.sizer.prefetchAmount)) return;
    const wanted = askAhead ? this.sizer.prefetchAmount : 0;
    // A deficit larger than the cap is asked for in several answers: the controller's restart
    // bound counts on no answer being longer than ceil(limit × request_period).
    const amount = Math.min(this.config.maxPrefetchAmount, Math.max(wanted, -ahead));
    this.refill(amount, now);
  }

  private refill(amount: number, now: number): void {
    this.inFlight = amount;
    this.refills += 1;
    this.sizer.recordRefill(now, amount);
    const withdraw = new AbortController();
    this.withdraw = withdraw;
    this.remote.acquirePaced(amount, AbortSignal.any([this.lifetime.signal, withdraw.signal])).then(
      (schedule) => {
        if (this.withdraw === withdraw) this.onRefilled(amount, schedule);
      },
      (error: unknown) => {
        if (this.withdraw === withdraw) this.onRefillFailed(error);
      },
    );
  }

  private onRefilled(amount: number, schedule: PaceSchedule): void {
    this.inFlight = 0;
    this.withdraw = null;
    if (this.closedWith) return;
    const now = this.clock.now();
    if (this.backlogged) this.wasting = false;
    this.lastIntervalMs = schedule.intervalMs;
    // A negative delay (a retry answered late) puts the first slots in the past, where they expire.
    // A run whose travel may exceed the expiry is lost whole (SlotSchedule.add): counted as expired,
    // not as wasted (the callers did keep up; the answer came too late).
    const granted = Math.min(amount, schedule.granted ?? amount);
    this.expired += this.slots.add(now + schedule.startDelayMs, schedule.intervalMs, granted, schedule.travelMs ?? 0);
    this.satisfy();
  }

  private onRefillFailed(thrown: unknown): void {
    this.inFlight = 0;
    this.withdraw = null;
    if (this.closedWith) return;
    this.refillFailures += 1;
    const error = asSluiceError(thrown, (message) => new SluiceError("CONTROLLER_UNAVAILABLE", `${this.name}: ${message}`));
    if (error.retriable) {
      this.retryPending = true;
      this.clock.sleep(this.config.retryDelayMs ?? 1000, this.lifetime.signal).then(
        () => {
          this.retryPending = false;
          this.satisfy();
        },
        () => {
          this.retryPending = false;
        },
      );
      return;
    }
    // Final error: fail, from the back, the callers that the slots held cannot cover.
    const now = this.clock.now();
    const covered = this.slots.available(now) + this.slots.upcoming(now);
    this.waiting.failFromBack(error, (queuedAmount) => fits(queuedAmount, covered));
    this.maybeFinishRetiring();
  }

  private mayDepart(amount: number, now: number): boolean {
    return this.departures === null || this.departures.admits(amount, now);
  }

  /** Records a hand-out; its departure moves to the end of this turn of the event loop. */
  private departed(amount: number, now: number): void {
    if (!this.departures) return;
    const departure = this.departures.record(amount, now);
    if (!this.clock.afterTurn) return;
    if (this.turnDepartures.length === 0) this.clock.afterTurn(this.onTurnEnd);
    this.turnDepartures.push(departure);
  }

  private expire(now: number, { callerWaited = false } = {}): void {
    const expired = this.slots.expire(now);
    if (expired <= TOLERANCE) return;
    this.expired += expired;
    if (!callerWaited) this.wasting = true;
  }

  /**
   * A retired client with nobody waiting closes at once and withdraws its request in flight: slots
   * answered to it now would go to nobody (sized for the old limit, they could span seconds).
   */
  private maybeFinishRetiring(): void {
    if (this.retiring && this.waiting.count === 0 && !this.closedWith) this.close("retired after reconfiguration");
  }
}
