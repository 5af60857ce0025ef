// services: processes, kafka
// delivery "exactly_once" (docs/design.md §13) on the real broker: `sluice controller` and two `sluice
// worker` processes, one SIGKILLed mid-run; a read_committed consumer of the output must see every
// input exactly once. Every process is started here and ended by its own pid.
import assert from "node:assert/strict";
import { after, describe, it } from "node:test";
import { type Child, sluice, startController } from "../support/processes.ts";
import { brokers, committedTotal, createTopic, kafka, produce, uniqueName } from "../support/kafka.ts";
import { exactlyOnceRelaySpec, exactlyOnceReport, readCommitted, type Relayed } from "../support/read-committed.ts";

const children: Child[] = [];
after(() => {
  for (const child of children) child.kill("SIGKILL");
});

function track(child: Child): Child {
  children.push(child);
  return child;
}

describe("delivery exactly_once on Kafka", () => {
  it("6 partitions, 2 workers, one SIGKILLed mid-run: a read_committed reader sees every input exactly once", async (t) => {
    const name = uniqueName("eos");
    const input = `${name}-in`;
    const output = `${name}-out`;
    const count = 20_000;
    await createTopic(input, 6);
    await createTopic(output, 6);
    await produce(input, count);
    const spec = exactlyOnceRelaySpec({ pipeline: name, brokers: await brokers(), input, output, rowsPerSecond: 3000 });
    const controller = await startController(spec);
    track(controller.child);
    const worker = (id: string) => track(sluice(["worker", spec, "--quiet", "--worker-id", id, "--controller", controller.address]));
    const w1 = worker("w1");
    const w2 = worker("w2");
    const live: Relayed[] = [];
    const reading = readCommitted(await kafka(), output, count, 180_000, 3000, live);
    // Mid-run: once w1 has committed some outputs. Iterations follow each other without pause at
    // 3,000 rows/s, so w1 always has outputs sent and not yet committed (with at_least_once, the
    // same kill leaves duplicates).
    const waitUntil = Date.now() + 60_000;
    while (live.filter((m) => m.job.startsWith("w1/")).length < 1500 && Date.now() < waitUntil) await new Promise((r) => setTimeout(r, 50));
    w1.kill("SIGKILL");
    t.diagnostic(`killed w1 after ${live.length} outputs were read`);
    const out = await reading;
    const w1Outputs = out.filter((m) => m.job.startsWith("w1/")).length;
    t.diagnostic(`w1 committed ${w1Outputs} outputs before the kill`);
    const context = `\nw1 stderr:\n${w1.stderr.slice(-2000)}\nw2 stderr:\n${w2.stderr.slice(-3000)}`;
    const { missing, repeated } = exactlyOnceReport(out, count);
    t.diagnostic(`${out.length} outputs read; ${missing.length} missing, ${repeated.length} ids more than once`);
    assert.equal(missing.length, 0, `missing ids (first ${missing.slice(0, 5).join(", ")})${context}`);
    assert.equal(repeated.length, 0, `ids seen more than once (first ${JSON.stringify(repeated.slice(0, 5))})${context}`);
    const byWorker = new Set(out.map((m) => m.job.split("/")[0]));
    assert.deepEqual([...byWorker].sort(), ["w1", "w2"], "w1 committed some batches before it was killed, w2 the rest");
    assert.equal(await committedTotal(`${name}.Relay`, input), count, "the offsets committed in the transactions cover the input");
  });
});
