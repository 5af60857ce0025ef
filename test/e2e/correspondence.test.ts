// services: processes, kafka
// priority: its refusals and waits are measured while other files run: its processes get the CPU first
// Seed 003 end to end (examples/correspondence): the two publishers write letters into a Kafka
// topic with 3 partitions; two `sluice worker` processes share one `sluice controller` and run the
// example's PdfGenerator through the smooth throttler `pdf` (10/s). The PDF generator is one
// service for both processes (an HTTP server here, with the seed's rule: ≥ 10 accepted in the last
// 1,000 ms → refuse), so the test sees what the protected system sees.
import assert from "node:assert/strict";
import { createServer, type Server } from "node:http";
import { after, describe, it } from "node:test";
import { type Subscription, takeUntil, timer } from "rxjs";
import { FakePdfGenerator, MAX_PER_SECOND, ThroughputExceededError } from "../../examples/correspondence/fake-pdf-generator.ts";
import publishers from "../../examples/correspondence/publishers.ts";
import { type Child, ROOT, sluice, startController, writeSpec } from "../support/processes.ts";
import { brokers, createTopic, kafka, uniqueName } from "../support/kafka.ts";

const PDF_GENERATOR = `${ROOT}/examples/correspondence/pdf-generator.ts`;
const PUBLISH_MS = 20_000;

const children: Child[] = [];
let service: Server | undefined;
after(() => {
  for (const child of children) child.kill("SIGKILL");
  service?.close();
});

/** The shared PDF generator: records every accepted call and refuses as the seed's does. */
async function startPdfService(): Promise<{ url: string; generator: FakePdfGenerator; acceptedAt: number[]; ids: Set<string> }> {
  const generator = new FakePdfGenerator();
  const acceptedAt: number[] = [];
  const ids = new Set<string>();
  service = createServer((request, response) => {
    const id = new URL(request.url ?? "/", "http://x").searchParams.get("id") ?? "";
    const now = Date.now();
    try {
      generator.generate(now);
      acceptedAt.push(now);
      ids.add(id);
      response.writeHead(200).end("ok");
    } catch (error) {
      response.writeHead(429).end(String(error instanceof ThroughputExceededError ? error.inWindow : 0));
    }
  });
  await new Promise<void>((resolve) => service?.listen(0, "127.0.0.1", resolve));
  const address = service.address();
  if (address === null || typeof address === "string") throw new Error("the PDF service has no port");
  return { url: `http://127.0.0.1:${address.port}`, generator, acceptedAt, ids };
}

/** Most calls in any closed window of `windowMs`. */
function mostInAnyWindow(times: readonly number[], windowMs: number): number {
  const sorted = [...times].sort((a, b) => a - b);
  let most = 0;
  let j = 0;
  for (let i = 0; i < sorted.length; i++) {
    while (j < sorted.length && (sorted[j] ?? 0) <= (sorted[i] ?? 0) + windowMs) j++;
    most = Math.max(most, j - i);
  }
  return most;
}

describe("correspondence example (seed 003) on Kafka", { timeout: 300_000 }, () => {
  it("2 workers, 1 controller, 3 partitions, 20 s of steady + burst letters: 0 refusals, every letter generated, ≤ 10 in any 1 s", async (t) => {
    const pdf = await startPdfService();
    const name = uniqueName("letters");
    await createTopic(`${name}-letters`, 3);
    await createTopic(`${name}-pdfs`, 3);
    const spec = writeSpec({
      pipeline: name,
      kafka: { brokers: await brokers(), session_timeout: "6s" },
      streams: { letters: { topic: `${name}-letters`, partitions: 3 }, pdfs: { topic: `${name}-pdfs`, partitions: 3 } },
      computations: { PdfGenerator: { module: PDF_GENERATOR, inputs: ["letters"], outputs: ["pdfs"], max_rows_per_batch: 1 } },
      dynamic_spec: {
        throttlers: { pdf: { limit: 10, period: "1s", request_period: "500ms", smooth: true } },
        computations: { PdfGenerator: { input_rows_throttler_id: "pdf" } },
      },
    });
    const controller = await startController(spec);
    children.push(controller.child);
    const env = { PDF_GENERATOR_URL: pdf.url };
    const workers = ["w1", "w2"].map((id) => sluice(["worker", spec, "--quiet", "--worker-id", id, "--controller", controller.address], env));
    children.push(...workers);
    await Promise.all(workers.map((w) => w.waitFor(/started PdfGenerator/, 120_000, "stderr")));
    await new Promise((r) => setTimeout(r, 1000));

    // The example's two publishers (rxjs), for 20 s, into the topic.
    const producer = (await kafka()).producer();
    await producer.connect();
    const sent = new Set<string>();
    const publishedAt = Date.now();
    let sending: Promise<unknown> = Promise.resolve();
    const subscription: Subscription = publishers.pipe(takeUntil(timer(PUBLISH_MS))).subscribe((letter) => {
      sent.add(letter.key);
      sending = sending.then(() => producer.send({ topic: `${name}-letters`, messages: [{ key: letter.key, value: JSON.stringify(letter.value) }], acks: -1 }));
    });
    await new Promise((r) => setTimeout(r, PUBLISH_MS + 100));
    subscription.unsubscribe();
    await sending;
    await producer.disconnect();

    const deadline = Date.now() + 60_000;
    while ([...sent].some((id) => !pdf.ids.has(id)) && Date.now() < deadline && pdf.generator.refusals === 0) {
      await new Promise((r) => setTimeout(r, 200));
    }
    const missing = [...sent].filter((id) => !pdf.ids.has(id));
    const most = mostInAnyWindow(pdf.acceptedAt, 1000);
    const span = (Math.max(...pdf.acceptedAt) - Math.min(...pdf.acceptedAt)) / 1000;
    t.diagnostic(
      `${sent.size} letters in ${PUBLISH_MS / 1000} s; generated ${pdf.ids.size} over ${span.toFixed(1)} s (${(pdf.acceptedAt.length / span).toFixed(2)}/s), ` +
        `most in any 1 s ${most}, refusals ${pdf.generator.refusals}, last letter ${((Math.max(...pdf.acceptedAt) - publishedAt) / 1000).toFixed(1)} s after publishing began`,
    );
    assert.equal(
      pdf.generator.refusals,
      0,
      `the PDF generator refused ${pdf.generator.refusals} calls\n${workers.map((w) => w.stderr.slice(-3000)).join("\n---\n")}`,
    );
    assert.equal(missing.length, 0, `${missing.length} of ${sent.size} letters not generated (first: ${missing.slice(0, 5).join(", ")})`);
    assert.ok(most <= MAX_PER_SECOND, `${most} calls in one second`);
    assert.ok(sent.size >= 140, `the publishers wrote ${sent.size} letters in 20 s (expected about 150: 80 steady, 8 per burst)`);
    const owners = workers.filter((w) => /started PdfGenerator/.test(w.stderr));
    assert.equal(owners.length, 2, "both workers ran jobs");
  });
});
