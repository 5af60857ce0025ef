// services: processes, kafka
// heavy: takes two of the end-to-end lane's slots (many processes, a browser or a private broker)
// delivery "exactly_once" (docs/design.md §13) across a broker restart: `sluice controller` and two `sluice
// worker` processes relay 6 partitions on a broker of this test's own (test/support/private-kafka.ts;
// the shared broker is never stopped), which is SIGKILLed mid-run and started again on the same
// ports and data. A read_committed consumer of the output must see every input exactly once, and
// both workers must still be running (they may retry, they may not give up). Every process is
// started here and ended by its own pid, the broker in the after hook also when the test fails.
// 60–75 s: two broker starts (6–15 s and 12–18 s on 2 cores), the relay, the workers' recovery.
import assert from "node:assert/strict";
import { after, describe, it } from "node:test";
import { Kafka, logLevel, type Admin } from "kafkajs";
import { type Child, sluice, startController, stopAll } from "../support/processes.ts";
import { PrivateKafka } from "../support/private-kafka.ts";
import { exactlyOnceRelaySpec, exactlyOnceReport, readCommitted, type Relayed } from "../support/read-committed.ts";
import { uniqueName } from "../support/kafka.ts";

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

const children: Child[] = [];
let broker: PrivateKafka | undefined;
/** Ends the read_committed reader: a test that timed out leaves it reading, and its kafkajs consumer would keep the file's process alive. */
const stopReading = new AbortController();
let reading: Promise<unknown> | undefined;
// Bounded whatever the processes and the broker do: the reader is told to stop and waited for at most
// 15 s (its disconnect is bounded by 10 s), the children and the broker are SIGKILLed by pid and
// waited for at most 5 s each.
after(async () => {
  stopReading.abort();
  await Promise.race([reading?.catch(() => {}), sleep(15_000)]);
  await stopAll(children, 0);
  await broker?.dispose();
});

/** The last lines a process wrote that are not kafkajs's own log (which repeats each retried request). */
function sluiceLines(stderr: string): string {
  return stderr
    .split("\n")
    .filter((line) => !line.startsWith('{"level"'))
    .slice(-25)
    .join("\n");
}

function track(child: Child): Child {
  children.push(child);
  return child;
}

async function setUpTopics(kafka: Kafka, input: string, output: string, count: number): Promise<void> {
  await admin(kafka, (a) =>
    a.createTopics({ topics: [input, output].map((topic) => ({ topic, numPartitions: 6, replicationFactor: 1 })), waitForLeaders: true }),
  );
  // Idempotent: a plain producer's retry of a send to a freshly started broker can write the
  // inputs twice, which would read as duplicates of the relay.
  const producer = kafka.producer({ idempotent: true, maxInFlightRequests: 1 });
  await producer.connect();
  try {
    for (let start = 0; start < count; start += 1000) {
      const messages = Array.from({ length: Math.min(1000, count - start) }, (_, i) => ({ key: `k${start + i}`, value: JSON.stringify({ id: start + i }) }));
      await producer.send({ topic: input, messages, acks: -1 });
    }
  } finally {
    await producer.disconnect();
  }
  const written = await admin(kafka, async (a) => (await a.fetchTopicOffsets(input)).reduce((sum, p) => sum + Number(p.high) - Number(p.low), 0));
  assert.equal(written, count, `the input topic holds each of the ${count} inputs once`);
}

async function admin<T>(kafka: Kafka, work: (admin: Admin) => Promise<T>): Promise<T> {
  const client = kafka.admin();
  await client.connect();
  try {
    return await work(client);
  } finally {
    await client.disconnect();
  }
}

async function committedTotal(kafka: Kafka, groupId: string, topic: string): Promise<number> {
  return admin(kafka, async (a) => {
    const [entry] = await a.fetchOffsets({ groupId, topics: [topic] });
    return (entry?.partitions ?? []).reduce((sum, p) => sum + Math.max(0, Number(p.offset)), 0);
  });
}

describe("delivery exactly_once on Kafka across a broker restart", () => {
  it("6 partitions, 2 workers, the broker SIGKILLed and started again mid-run: a read_committed reader sees every input exactly once", {
    timeout: 300_000,
  }, async (t) => {
    process.env["KAFKAJS_NO_PARTITIONER_WARNING"] = "1";
    broker = await PrivateKafka.start();
    t.diagnostic(broker.startLines.join("\n"));
    const kafka = new Kafka({
      clientId: "sluice-e2e-restart",
      brokers: broker.brokers,
      logLevel: logLevel.NOTHING,
      retry: { retries: 30, maxRetryTime: 2000 },
    });
    const name = uniqueName("eos-restart");
    const input = `${name}-in`;
    const output = `${name}-out`;
    const count = 12_000;
    await setUpTopics(kafka, input, output, count);
    const spec = exactlyOnceRelaySpec({ pipeline: name, brokers: broker.brokers, input, output, rowsPerSecond: 1000 });
    const controller = await startController(spec);
    track(controller.child);
    const worker = (id: string) => track(sluice(["worker", spec, "--quiet", "--worker-id", id, "--controller", controller.address]));
    const w1 = worker("w1");
    const w2 = worker("w2");
    const live: Relayed[] = [];
    const read = readCommitted(kafka, output, count, 150_000, 3000, live, stopReading.signal);
    reading = read;
    // Mid-run: both workers have committed outputs, and at 1,000 rows/s in batches of 50 each
    // has transactions open when the broker dies.
    const waitUntil = Date.now() + 60_000;
    const committedBy = (w: string) => live.filter((m) => m.job.startsWith(`${w}/`)).length;
    while ((committedBy("w1") < 300 || committedBy("w2") < 300) && Date.now() < waitUntil) await sleep(50);
    const beforeRestart = live.length;
    const downAt = Date.now();
    await broker.kill("SIGKILL");
    await broker.startAgain();
    t.diagnostic(`broker SIGKILLed after ${beforeRestart} outputs were read, down ${((Date.now() - downAt) / 1000).toFixed(1)} s; ${broker.startLines.at(-1)}`);
    const out = await read;
    const afterRestart = out.length - beforeRestart;
    const { missing, repeated } = exactlyOnceReport(out, count);
    const copies = repeated.slice(0, 3).map(([id]) =>
      out
        .filter((m) => m.id === id)
        .map((m) => `${m.job} p${m.partition} at ${new Date(m.at ?? 0).toISOString()}`)
        .join(" | "),
    );
    const context =
      `\nfirst repeated ids, each copy: ${copies.join("; ")}` +
      `\nw1 stderr:\n${sluiceLines(w1.stderr)}\nw2 stderr:\n${sluiceLines(w2.stderr)}\ncontroller stderr:\n${sluiceLines(controller.child.stderr)}`;
    t.diagnostic(`${out.length} outputs read (${afterRestart} after the restart); ${missing.length} missing, ${repeated.length} ids more than once`);
    for (const [id, w] of [
      ["w1", w1],
      ["w2", w2],
    ] as const) {
      const lines = w.stderr.split("\n");
      const failures = lines.filter((line) => / failed \(\d+ in a row\)/.test(line)).length;
      const reclaims = lines.filter((line) => line.includes("claimed again")).length;
      t.diagnostic(`${id}: ${failures} failed iterations retried, ${reclaims} lines about partitions claimed again`);
    }
    assert.ok(beforeRestart > 0 && beforeRestart < count, `the broker restarted mid-run (${beforeRestart} of ${count} outputs read before)${context}`);
    assert.equal(missing.length, 0, `missing ids (first ${missing.slice(0, 5).join(", ")})${context}`);
    assert.equal(repeated.length, 0, `ids seen more than once (first ${JSON.stringify(repeated.slice(0, 5))})${context}`);
    for (const [id, w] of [
      ["w1", w1],
      ["w2", w2],
    ] as const) {
      assert.equal(w.process.exitCode, null, `worker ${id} still runs after the restart (exit ${w.process.exitCode})${context}`);
    }
    assert.equal(await committedTotal(kafka, `${name}.Relay`, input), count, "the offsets committed in the transactions cover the input");
  });
});
