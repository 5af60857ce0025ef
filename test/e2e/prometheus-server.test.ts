// services: prometheus
// The test Prometheus of scripts/prometheus.mjs: the server scripts/test.mjs started (or one started
// here) scrapes a target a test registers as a file_sd file, and forgets it once removed.
//
//   pnpm test test/e2e/prometheus-server.test.ts
import assert from "node:assert/strict";
import { createServer } from "node:http";
import type { AddressInfo } from "node:net";
import { randomUUID } from "node:crypto";
import { after, before, test } from "node:test";
import { prometheusScript, queryNumber, waitForNumber, type SharedPrometheus } from "../support/prometheus-server.ts";

let prometheus: SharedPrometheus | undefined;
before(async () => {
  prometheus = await (await prometheusScript()).ensurePrometheus();
});
after(async () => {
  await prometheus?.stop();
});

test("a registered target is scraped every second; a removed one goes stale", async () => {
  assert.ok(prometheus);
  let value = 1;
  const server = createServer((_req, res) => {
    res.setHeader("content-type", "text/plain; version=0.0.4");
    res.end(`# HELP demo_value A value the test changes.\n# TYPE demo_value gauge\ndemo_value ${value}\n`);
  });
  await new Promise<void>((done) => server.listen(0, "127.0.0.1", done));
  const port = (server.address() as AddressInfo).port;
  const testId = randomUUID();
  const script = await prometheusScript();
  const target = script.registerScrapeTarget(`127.0.0.1:${port}`, { test_id: testId });
  try {
    const query = `demo_value{test_id="${testId}"}`;
    assert.equal(await waitForNumber(prometheus.url, query), 1);
    value = 2;
    // Scrape interval 1 s: the new value shows within a few seconds (generous for a loaded machine).
    const deadline = Date.now() + 10_000;
    while ((await queryNumber(prometheus.url, query)) !== 2) {
      assert.ok(Date.now() < deadline, "the new value was not scraped within 10 s");
      await new Promise((done) => setTimeout(done, 200));
    }
    target.remove();
    // Once the target is gone Prometheus writes a staleness marker and the query answers nothing.
    const staleBy = Date.now() + 15_000;
    while ((await queryNumber(prometheus.url, query)) !== undefined) {
      assert.ok(Date.now() < staleBy, "the removed target's series did not go stale within 15 s");
      await new Promise((done) => setTimeout(done, 250));
    }
  } finally {
    target.remove();
    server.close();
  }
});
