// services: processes
// A keyed throttler's keys in `sluice top` over a real `sluice controller` (docs/design.md §11.4): the keys
// live, refused and forgotten, and the same top keys by wait as /metrics exports; and
// `sluice top --throttler <id> --key <key>`, which asks DescribeThrottlers for one key. The waits are
// made by real RequestQuota calls over gRPC: a key driven into debt waits for it to be paid off.
import assert from "node:assert/strict";
import { after, before, describe, it } from "node:test";
import { isSluiceError } from "@sluice/core";
import { createGrpcQuotaClient, type QuotaServiceClient } from "@sluice/protocol";
import { scrape } from "../support/prometheus.ts";
import { type Child, NOOP_COMPUTATION, sluice, writeSpec } from "../support/processes.ts";

const children: Child[] = [];
let client: QuotaServiceClient | null = null;
after(() => {
  client?.close();
  for (const child of children) child.kill("SIGKILL");
});

function track(child: Child): Child {
  children.push(child);
  return child;
}

describe("keyed throttler in sluice top", { timeout: 120_000 }, () => {
  let address = "";
  let metricsUrl = "";
  before(async () => {
    const spec = writeSpec({
      pipeline: "keyed-top",
      streams: { input: { topic: "input" } },
      computations: { Reader: { module: NOOP_COMPUTATION, inputs: ["input"] } },
      dynamic_spec: {
        throttlers: { per_customer: { limit: 1, period: "1s", keyed: { max_keys: 3, overrides: { acme: { limit: 50 } } } }, plain: { limit: 100 } },
        computations: {},
      },
    });
    const controller = track(sluice(["controller", spec, "--port", "0", "--http-port", "0"]));
    address = `127.0.0.1:${(await controller.waitFor(/listening on 127\.0\.0\.1:(\d+)/))[1]}`;
    metricsUrl = `http://127.0.0.1:${(await controller.waitFor(/dashboard on http:\/\/127\.0\.0\.1:(\d+)\//))[1]}/metrics`;
    client = createGrpcQuotaClient(address);
    const quota = client;
    let n = 0;
    const ask = (key: string, amount: number) =>
      quota.requestQuota(
        { throttlerId: "per_customer", clientId: "top-test", amount, timestampMs: Date.now(), quotaClassId: "", requestId: `r-${n++}`, key },
        { deadlineAt: Date.now() + 30_000 },
      );
    // At 1/s, slow owes 5 s and medium 2 s: the next request of each waits about that long, a loaded
    // machine's stalls between the calls aside (seconds of margin).
    await ask("slow", 6);
    await ask("medium", 3);
    await ask("acme", 1);
    const [slow, medium] = await Promise.all([ask("slow", 1), ask("medium", 1)]);
    assert.ok(slow.waitedMs > medium.waitedMs, `slow waited ${slow.waitedMs} ms, medium ${medium.waitedMs} ms`);
    await assert.rejects(ask("fourth", 1), (error: unknown) => isSluiceError(error, "TOO_MANY_KEYS"));
  });

  it("--once shows the keys live, refused and forgotten, and the same top keys as /metrics, most waited first", async () => {
    const top = track(sluice(["top", "--controller", address, "--once"]));
    const { code } = await top.exited;
    assert.equal(code, 0, top.stderr);
    const lines = top.stdout.trimEnd().split("\n");
    const at = lines.findIndex((line) => line.startsWith("per_customer"));
    assert.ok(at >= 0, top.stdout);
    assert.match(lines[at + 1] ?? "", /^ {2}keys 3 live of max 3 \(3 with a bucket, the rest parked\) · 1 refused · 0 forgotten · idle_timeout 10m$/);
    assert.match(lines[at + 2] ?? "", /^ {2}top keys by wait, last minute\s+waited\s+balance\s+waiting$/);
    const shown = [lines[at + 3], lines[at + 4]].map((line) => /^ {2}(\S+)\s/.exec(line ?? "")?.[1]);
    assert.deepEqual(shown, ["slow", "medium"], top.stdout);
    assert.doesNotMatch(top.stdout, /^ {2}acme\s/m, "acme never waited: not a top key");

    const metrics = await scrape(metricsUrl);
    const exported = metrics
      .all("sluice_controller_throttler_top_key_wait_ms", { throttler_id: "per_customer" })
      .sort((a, b) => b.value - a.value)
      .map((sample) => sample.labels["key"]);
    assert.deepEqual(exported, shown, "the same keys, in the same order, as /metrics");
    assert.equal(metrics.value("sluice_controller_throttler_keys", { throttler_id: "per_customer" }), 3);
    assert.equal(metrics.value("sluice_controller_throttler_refused_keys_total", { throttler_id: "per_customer" }), 1);
  });

  it("--throttler and --key show one key's own figures, as DescribeThrottlers answers for it", async () => {
    const top = track(sluice(["top", "--controller", address, "--once", "--throttler", "per_customer", "--key", "acme"]));
    const { code } = await top.exited;
    assert.equal(code, 0, top.stderr);
    assert.doesNotMatch(top.stdout, /^plain/m, "only the throttler asked for");
    assert.match(
      top.stdout,
      /^ {2}key "acme": active \(a bucket of its own\) · limit 50 per 1s \(override\) · balance [\d.]+ of 50 · 0 waiting · waited 0\.0 ms over the last minute/m,
    );

    const never = track(sluice(["top", "--controller", address, "--once", "--throttler", "per_customer", "--key", "nobody"]));
    assert.equal((await never.exited).code, 0, never.stderr);
    assert.match(never.stdout, /^ {2}key "nobody": not remembered \(starts full\) · limit 1 per 1s · balance 1 of 1/m);

    const plain = track(sluice(["top", "--controller", address, "--once", "--throttler", "plain", "--key", "acme"]));
    assert.equal((await plain.exited).code, 1);
    assert.match(plain.stderr, /throttler "plain" is not keyed/);

    const alone = track(sluice(["top", "--controller", address, "--once", "--key", "acme"]));
    assert.equal((await alone.exited).code, 1);
    assert.match(alone.stderr, /--key names a key of a keyed throttler: give that throttler with --throttler <id>/);
  });
});
