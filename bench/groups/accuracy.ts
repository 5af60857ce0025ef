// Group 4: does the throttler grant the right amount, to the right party, at the right time?
// Claims about processes are measured with processes; the client algorithm alone in virtual time.
import { formatNumber } from "../lib/format.ts";
import type { BenchGroup } from "../lib/group.ts";
import { measureCatchUp } from "./accuracy-catch-up.ts";
import { CHUNK, CLASS_LIMIT, CLASS_WEIGHTS, measureClasses } from "./accuracy-classes.ts";
import { measureRateAccuracy, RATE_LIMIT, REQUEST_PERIOD_MS } from "./accuracy-rate.ts";
import { measureVirtual, VIRTUAL_CLIENTS, VIRTUAL_REQUEST_PERIOD_MS } from "./accuracy-virtual.ts";

const percent = (fractions: readonly number[]) => fractions.map((f) => f * 100);

export const accuracy: BenchGroup = {
  id: "accuracy",
  title: "4. Accuracy: rate, class shares, class-switch latency, RPCs per period, over-grant, catch-up",
  async run(g) {
    const [rate, virtual, classes, catchUp] = await g.inTurn([
      () => measureRateAccuracy(g),
      () => measureVirtual(g),
      () => measureClasses(g),
      () => measureCatchUp(g),
    ]);

    // Rate.
    const rateFigure = g.add({
      id: "accuracy.rate.error",
      label: `rate error over ${rate.windowS} s at ${RATE_LIMIT}/s, 8 jobs in 2 processes`,
      unit: "%",
      better: "lower",
      sluice: percent(rate.consumedError),
      peers: { "the same, granted at the controller": percent(rate.grantedError) },
      withoutRatios: true,
      note: "|consumed rate − limit| ÷ limit, consumed by the jobs inside the window (after the initial bucket was spent); the controller's granted counter over the same window beside it",
    });
    g.add({
      id: "accuracy.rate.virtual_error",
      label: `rate error in virtual time, ${VIRTUAL_CLIENTS} backlogged clients`,
      unit: "%",
      better: "lower",
      sluice: (virtual.get("backlogged") ?? []).map((run) => Math.abs(run.rateError) * 100),
      note: "the client algorithm and a real Controller on a ManualClock: no process or machine noise",
    });
    g.goal({
      id: "accuracy.rate",
      text: "rate error ≤ 1 % over 30 s at 1,000/s (8 jobs, 2 processes)",
      figure: rateFigure,
      value: rateFigure.sluice?.median ?? null,
      target: 1,
      compare: "<=",
    });

    // Class shares.
    const total = Object.values(CLASS_WEIGHTS).reduce((sum, w) => sum + w, 0);
    const worstRuns = (errors: Record<string, number[]>) =>
      (Object.values(errors)[0] ?? []).map((_, run) => Math.max(...Object.values(errors).map((runs) => Math.abs(runs[run] ?? Number.NaN))) * 100);
    for (const [name, weight] of Object.entries(CLASS_WEIGHTS)) {
      g.add({
        id: `accuracy.classes.share_error.${name}`,
        label: `class of weight ${weight}: share vs ${weight}/${total}, end to end`,
        unit: "% (signed)",
        better: "lower",
        sluice: percent(classes.shareErrors[name] ?? []),
        peers: { "granted at the controller": percent(classes.grantedShareErrors[name] ?? []) },
        withoutRatios: true,
        note: "rows processed by the computation in the window ÷ all rows processed, relative to its weight's share",
      });
    }
    const shareFigure = g.add({
      id: "accuracy.classes.worst_share_error",
      label: "largest class share error (5:3:1, backlogged, end to end)",
      unit: "%",
      better: "lower",
      sluice: worstRuns(classes.shareErrors),
      peers: { "granted at the controller": worstRuns(classes.grantedShareErrors) },
      withoutRatios: true,
    });
    g.goal({
      id: "accuracy.classes.shares",
      text: "5:3:1 backlogged class shares within ±2 % of the weights, end to end",
      figure: shareFigure,
      value: shareFigure.sluice?.median ?? null,
      target: 2,
      compare: "<=",
    });

    // Class switch.
    const switchBound = 2 * classes.chunkMs + 20;
    const switchFigure = g.add({
      id: "accuracy.classes.switch_latency",
      label: `idle class's first message, append → processed (chunk ${formatNumber(classes.chunkMs)} ms)`,
      unit: "ms",
      better: "lower",
      sluice: classes.switchMedianMs,
      peers: { "worst probe of the run": classes.switchMaxMs, "bound: 2 chunk times + 20 ms": classes.switchMedianMs.map(() => switchBound) },
      note: `limit ${CLASS_LIMIT}/s, max_grant_amount ${CHUNK}; each probe is one message on a partition nobody read yet (a new job, a new client, its first RPC) while the 5:3:1 classes are backlogged; the figure is each run's median probe`,
    });
    g.goal({
      id: "accuracy.classes.switch",
      text: "class-switch latency ≤ 2 chunk times + 20 ms",
      figure: switchFigure,
      value: switchFigure.sluice?.median ?? null,
      target: switchBound,
      compare: "<=",
      describe: `${formatNumber(switchFigure.sluice?.median ?? NaN)} ms median probe (bound ${formatNumber(switchBound)} ms; worst probe ${formatNumber(Math.max(...classes.switchMaxMs))} ms)`,
    });

    // RPCs per request_period.
    const rpcBound = g.add({
      id: "accuracy.rpcs.binding",
      label: `RPCs per client per request_period, quota binding (${RATE_LIMIT}/s shared by 8, processes)`,
      unit: "RPCs",
      better: "lower",
      sluice: rate.rpcsPerPeriod,
      published: { "CockroachDB tenant buckets": "1 request per 10–30 s per node", Doorman: "1 lease refresh per refresh interval (≥ 5 s)" },
      note: `request_period ${REQUEST_PERIOD_MS} ms; from the rate runs above`,
    });
    const rpcPaced = g.add({
      id: "accuracy.rpcs.not_binding",
      label: `RPCs per client per request_period, quota not binding (virtual time)`,
      unit: "RPCs",
      better: "lower",
      sluice: (virtual.get("paced") ?? []).map((run) => run.rpcsPerPeriod),
      peers: { "backlogged clients (virtual time)": (virtual.get("backlogged") ?? []).map((run) => run.rpcsPerPeriod) },
      note: `${VIRTUAL_CLIENTS} clients each taking 10 units every 100 ms under a 1,000,000/s limit; request_period ${VIRTUAL_REQUEST_PERIOD_MS} ms; counted after the warm-up`,
    });
    g.goal({
      id: "accuracy.rpcs.binding",
      text: "≤ 1.5 RPCs per client per request_period in steady state (quota binding)",
      figure: rpcBound,
      value: rpcBound.sluice?.median ?? null,
      target: 1.5,
      compare: "<=",
    });
    g.goal({
      id: "accuracy.rpcs.not_binding",
      text: "≤ 1.5 RPCs per client per request_period in steady state (quota not binding)",
      figure: rpcPaced,
      value: rpcPaced.sluice?.median ?? null,
      target: 1.5,
      compare: "<=",
    });

    // Over-grant.
    const overReal = g.add({
      id: "accuracy.overgrant.processes",
      label: "largest local pool ÷ (limit × request_period), backlogged jobs in processes",
      unit: "×",
      better: "lower",
      sluice: rate.maxPool,
      peers: { "pool + refill in flight": rate.maxClaimed },
      withoutRatios: true,
      note: "quota granted to a client and not yet handed to a caller, read right after every refill landed (the only moment the pool grows); the largest of any client in the run",
    });
    const overBacklogged = g.add({
      id: "accuracy.overgrant.backlogged",
      label: "largest local pool ÷ (limit × request_period), backlogged (virtual time)",
      unit: "×",
      better: "lower",
      sluice: (virtual.get("backlogged") ?? []).map((run) => run.maxPool),
      peers: { "pool + refill in flight": (virtual.get("backlogged") ?? []).map((run) => run.maxClaimed) },
      withoutRatios: true,
    });
    const overBursty = g.add({
      id: "accuracy.overgrant.bursty",
      label: "largest local pool ÷ (limit × request_period), bursts then idle (virtual time)",
      unit: "×",
      better: "lower",
      sluice: (virtual.get("bursty") ?? []).map((run) => run.maxPool),
      peers: { "pool + refill in flight": (virtual.get("bursty") ?? []).map((run) => run.maxClaimed) },
      withoutRatios: true,
      note: "each client idles up to 2 s, then makes 20–200 calls as fast as the quota allows: a burst that ends just as the refill it kept queued lands leaves that refill on top of the pool's leftover",
    });
    const worst = Math.max(...[overReal, overBacklogged, overBursty].flatMap((f) => (f.sluice ? [f.sluice.max] : [])));
    g.goal({
      id: "accuracy.overgrant",
      text: "quota outstanding in a client's pool never exceeds limit × request_period",
      figure: overBursty,
      value: worst,
      target: 1,
      compare: "<=",
      describe: `largest pool ×${formatNumber(worst)} of limit × request_period over every run (processes ×${formatNumber(overReal.sluice?.max ?? NaN)}, backlogged ×${formatNumber(overBacklogged.sluice?.max ?? NaN)}, bursty ×${formatNumber(overBursty.sluice?.max ?? NaN)})`,
    });

    // Catch-up.
    g.add({
      id: "accuracy.catch_up",
      label: "lagging partition catches up with a leading one under scarce quota",
      unit: "s",
      better: "lower",
      sluice: catchUp.catchUpS,
      peers: {
        "model: strict lag priority": {
          runs: catchUp.catchUpS.map(() => catchUp.idealS),
          note: "(backlog − half the initial bucket, which goes to both on arrival) ÷ limit",
        },
        "model: fair split, no lag priority": {
          runs: catchUp.catchUpS.map(() => catchUp.fairS),
          note: "what a static split (Flink's r/parallelism) or FIFO sharing takes",
        },
      },
      note: `leading partition's rows processed meanwhile: ${catchUp.leadingRows.join(", ")}`,
    });
  },
};
