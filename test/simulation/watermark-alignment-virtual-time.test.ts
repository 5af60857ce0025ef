// Watermark alignment (docs/design.md §12) in virtual time: the workers' side (WatermarkAlignment and its
// AlignedPartitions) against the controller's real alignment groups, over the in-memory transport,
// all on one ManualClock. No Kafka and no sleeping: what is tested is the algorithm, including the
// ways Flink's alignment is known to get stuck (reference/peers.md §7).
import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { Controller } from "@sluice/controller";
import { ManualClock } from "@sluice/core";
import { createInMemoryQuotaClient, type QuotaServiceClient } from "@sluice/protocol";
import { type AlignedPartition, WatermarkAlignment, type AlignmentSettings } from "@sluice/runtime";

const MIN = 60_000;
const HOUR = 60 * MIN;
const T0 = 1_700_000_000_000;
const SETTINGS: AlignmentSettings = { groupName: "g", driftBoundMs: 10 * MIN, idleTimeoutMs: 5_000 };
const quiet = { info: () => {}, warn: () => {}, error: () => {} };

function controllerOn(clock: ManualClock): Controller {
  return new Controller({ dynamicSpec: { throttlers: {}, computations: {} }, computations: [], clock, alignmentEntryTtlMs: 3_000 });
}

function workerOn(clock: ManualClock, workerId: string, client: () => QuotaServiceClient): WatermarkAlignment {
  return new WatermarkAlignment({ workerId, client, clock, log: quiet, reportIntervalMs: 1_000 });
}

/** A job on one partition: reads iterations whose event times the test gives, passing the gate like Job does. */
class SimulatedJob {
  private waiting: Promise<void> | null = null;
  readonly stop = new AbortController();
  holds = 0;
  constructor(readonly partition: AlignedPartition) {}

  /** Reads one iteration if the gate lets it now; otherwise waits (held). True when it read. */
  tryRead(eventTimesMs: readonly number[]): boolean {
    if (this.waiting) return false;
    if (!this.partition.mayRead()) {
      this.partition.begin();
      this.waiting = this.partition
        .whenReadable(this.stop.signal, (held) => {
          if (held) this.holds += 1;
        })
        .finally(() => {
          this.partition.end();
          this.waiting = null;
        });
      return false;
    }
    this.partition.begin();
    this.partition.noteRead(eventTimesMs);
    this.partition.end();
    return true;
  }
}

/** Lets the report loops and promise callbacks run for `ms` of virtual time. */
async function run(clock: ManualClock, ms: number): Promise<void> {
  for (let elapsed = 0; elapsed < ms; elapsed += 100) {
    await clock.advance(100);
    for (let i = 0; i < 5; i++) await new Promise<void>((resolve) => setImmediate(resolve));
  }
}

describe("watermark alignment in virtual time", () => {
  it("holds the partition an hour ahead while the other catches up, then both read; the slowest is never held", async () => {
    const clock = new ManualClock(T0);
    const controller = controllerOn(clock);
    const client = createInMemoryQuotaClient(controller, { clock });
    const worker = workerOn(clock, "w1", () => client);
    const behind = new SimulatedJob(worker.partition("C", "in", 0, SETTINGS));
    const ahead = new SimulatedJob(worker.partition("C", "in", 1, SETTINGS));
    await run(clock, 100);

    assert.ok(ahead.tryRead([T0 + HOUR]), "nothing read yet anywhere: its first iteration passes");
    await run(clock, 100);
    assert.equal(ahead.tryRead([T0 + HOUR + MIN]), false, "the other partition has read nothing: it holds the group at its start");
    assert.equal(ahead.partition.held, true);

    // The behind partition reads one minute of event time per iteration, 10 iterations per second.
    let behindAt = T0;
    let aheadReadsWhileFarBehind = 0;
    while (behindAt < T0 + 2 * HOUR) {
      assert.ok(behind.tryRead([behindAt]), `the slowest partition is never held (at +${(behindAt - T0) / MIN} min)`);
      if (ahead.tryRead([Math.max(ahead.partition.watermarkMs + MIN, behindAt)]) && behindAt < T0 + HOUR - SETTINGS.driftBoundMs - 2 * MIN)
        aheadReadsWhileFarBehind += 1;
      behindAt += MIN;
      await run(clock, 100);
    }
    assert.equal(aheadReadsWhileFarBehind, 0, "the partition ahead did not read while the other was more than drift_bound (+ one report) behind");
    assert.ok(ahead.holds >= 1);
    assert.ok(
      ahead.partition.watermarkMs >= T0 + 2 * HOUR - SETTINGS.driftBoundMs - 5 * MIN,
      `both read once caught up (ahead at +${(ahead.partition.watermarkMs - T0) / MIN} min)`,
    );
    await worker.close();
    controller.close();
  });

  it("catch-up is not capped: the slowest partition reads hours of event time between two reports", async () => {
    const clock = new ManualClock(T0);
    const controller = controllerOn(clock);
    const client = createInMemoryQuotaClient(controller, { clock });
    const worker = workerOn(clock, "w1", () => client);
    const slow = new SimulatedJob(worker.partition("C", "in", 0, SETTINGS));
    const fast = new SimulatedJob(worker.partition("C", "in", 1, SETTINGS));
    assert.ok(slow.tryRead([T0]));
    assert.ok(fast.tryRead([T0 + 5 * HOUR]));
    await run(clock, 200);
    // 300 iterations of one minute each with no report in between: 5 h of event time, never held.
    for (let i = 1; i <= 300; i++) assert.ok(slow.tryRead([T0 + i * MIN]), `iteration ${i}`);
    await worker.close();
    controller.close();
  });

  it("an idle partition stops holding the group back; a held partition is never idle", async () => {
    const clock = new ManualClock(T0);
    const controller = controllerOn(clock);
    const client = createInMemoryQuotaClient(controller, { clock });
    const worker = workerOn(clock, "w1", () => client);
    const quiet = new SimulatedJob(worker.partition("C", "in", 0, SETTINGS));
    const busy = new SimulatedJob(worker.partition("C", "in", 1, SETTINGS));
    assert.ok(quiet.tryRead([T0]));
    assert.ok(busy.tryRead([T0 + HOUR]));
    await run(clock, 200);
    assert.equal(busy.tryRead([T0 + HOUR + MIN]), false, "held: an hour ahead of a live partition");
    await run(clock, 3_000);
    assert.equal(busy.partition.held, true, "still held before idle_timeout");
    assert.equal(busy.partition.report(clock.now()).idle, false);
    await run(clock, SETTINGS.idleTimeoutMs + 2_000);
    assert.equal(quiet.partition.isIdle(clock.now()), true, "no data for idle_timeout");
    assert.equal(busy.partition.held, false, "released once the other went idle");
    assert.ok(busy.tryRead([T0 + HOUR + 2 * MIN]));
    await worker.close();
    controller.close();
  });

  it("a held partition resumes when the rest of its group is revoked, or its worker dies (its entries expire)", async () => {
    const clock = new ManualClock(T0);
    const controller = controllerOn(clock);
    const client = createInMemoryQuotaClient(controller, { clock });
    const w1 = workerOn(clock, "w1", () => client);
    const w2 = workerOn(clock, "w2", () => client);
    const behind = new SimulatedJob(w1.partition("C", "in", 0, SETTINGS));
    const alsoBehind = new SimulatedJob(w2.partition("C", "in", 2, SETTINGS));
    const ahead = new SimulatedJob(w2.partition("C", "in", 1, SETTINGS));
    assert.ok(behind.tryRead([T0]));
    assert.ok(alsoBehind.tryRead([T0]));
    assert.ok(ahead.tryRead([T0 + HOUR]));
    await run(clock, 300);
    assert.equal(ahead.tryRead([T0 + HOUR + MIN]), false);
    assert.equal(ahead.partition.held, true);

    w2.forget("C", "in", 2); // revoked from w2 (a rebalance)
    await run(clock, 1_500);
    assert.equal(ahead.partition.held, true, "w1's partition still holds it");
    await w1.close(); // w1 dies: it stops reporting, its partition expires after the entry TTL
    // keep the other partitions busy so that nobody becomes idle meanwhile
    behind.partition.begin();
    await run(clock, 4_000);
    assert.equal(ahead.partition.held, false, "no other live member: it resumes");
    await w2.close();
    controller.close();
  });

  it("survives a controller restart: re-reported state is enough, and a hold from before the restart lasts only while the new one settles", async () => {
    const clock = new ManualClock(T0);
    let controller = controllerOn(clock);
    let client = createInMemoryQuotaClient(controller, { clock });
    const w1 = workerOn(clock, "w1", () => client);
    const w2 = workerOn(clock, "w2", () => client);
    const behind = new SimulatedJob(w1.partition("C", "in", 0, SETTINGS));
    const ahead = new SimulatedJob(w2.partition("C", "in", 1, SETTINGS));
    assert.ok(behind.tryRead([T0]));
    assert.ok(ahead.tryRead([T0 + HOUR]));
    await run(clock, 300);
    assert.equal(ahead.tryRead([T0 + HOUR + MIN]), false);
    behind.partition.begin(); // a batch waiting (for quota, say) all along: never idle

    controller.close();
    await run(clock, 2_000); // down: reports fail, the hold stays
    assert.equal(ahead.partition.held, true, "an unreachable controller releases nothing");
    controller = controllerOn(clock);
    client = createInMemoryQuotaClient(controller, { clock });
    // Both workers report again within one interval; the held partition stays held on the new
    // controller's word (the other is still an hour behind) and after settling.
    await run(clock, 5_000);
    assert.equal(ahead.partition.held, true, "still an hour ahead of the group known again from re-reports");
    const snapshot = controller.snapshot().alignment ?? [];
    assert.deepEqual(
      snapshot.map((g) => [g.group, g.watermarkMs, g.partitions, g.held]),
      [["g", T0, 2, 1]],
    );
    for (let t = T0 + MIN; t <= T0 + HOUR; t += 5 * MIN) {
      assert.ok(behind.tryRead([t]));
      await run(clock, 200);
    }
    await run(clock, 1_200);
    assert.equal(ahead.partition.held, false, "released once the group caught up");
    await w1.close();
    await w2.close();
    controller.close();
  });

  it("never stalls: random speeds, gaps and data ends over 6 partitions, every partition reads all of its data", async () => {
    const clock = new ManualClock(T0);
    const controller = controllerOn(clock);
    const client = createInMemoryQuotaClient(controller, { clock });
    const workers = [workerOn(clock, "w1", () => client), workerOn(clock, "w2", () => client)];
    let seed = 42;
    const random = () => {
      seed = (seed * 1_103_515_245 + 12_345) % 2_147_483_648;
      return seed / 2_147_483_648;
    };
    const jobs = Array.from({ length: 6 }, (_, i) => {
      const job = new SimulatedJob((workers[i % 2] as WatermarkAlignment).partition("C", "in", i, SETTINGS));
      // Each partition: a start offset of up to 3 h, 200 iterations, steps of 0–4 min with a rare 2 h gap.
      let at = T0 + Math.floor(random() * 3 * HOUR);
      const times = Array.from({ length: 50 + Math.floor(random() * 150) }, () => (at += random() < 0.02 ? 2 * HOUR : Math.floor(random() * 4 * MIN)));
      return { job, times, next: 0 };
    });
    let rounds = 0;
    while (jobs.some((j) => j.next < j.times.length)) {
      rounds += 1;
      assert.ok(rounds < 20_000, `stalled: ${jobs.map((j) => `${j.next}/${j.times.length}${j.job.partition.held ? " held" : ""}`).join(", ")}`);
      for (const j of jobs) {
        const t = j.times[j.next];
        if (t !== undefined && random() < 0.7 && j.job.tryRead([t])) j.next += 1;
      }
      await run(clock, 100);
    }
    for (const w of workers) await w.close();
    controller.close();
  });
});
