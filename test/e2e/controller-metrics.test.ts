// services: processes
// `sluice controller --http-port`: its /metrics scraped while job-like quota clients (child
// processes, over gRPC) compete for one throttler in three classes, and checked against what the
// clients report they consumed, how many RPCs they sent, and what the test itself did (an unknown
// class, a release, a reconfiguration). Every process is started here and ended by its own pid.
import assert from "node:assert/strict";
import { writeFileSync } from "node:fs";
import { after, it } from "node:test";
import { systemClock } from "@sluice/core";
import { createGrpcQuotaClient } from "@sluice/protocol";
import { get, scrape, type Exposition } from "../support/prometheus.ts";
import { NOOP_COMPUTATION, sluice, tsNode, writeSpec, type Child } from "../support/processes.ts";

interface ClientResult {
  consumed: number;
  error: { code: string; message: string } | null;
  metrics: { rpcCount: number; rpcFailures: number };
}

const LIMIT = 200;
const REQUEST_PERIOD_MS = 200;
/** A client's prefetch window: ceil(limit × request_period) (docs/design.md §9.7). */
const PREFETCH_CAP = Math.ceil((LIMIT * REQUEST_PERIOD_MS) / 1000);

const children: Child[] = [];
after(() => {
  for (const child of children) child.kill("SIGKILL");
});

function dynamicSpec(limit: number) {
  return {
    throttlers: {
      api: { limit, period: "1s", request_period: `${REQUEST_PERIOD_MS}ms`, classes: { gold: { weight: 3 }, silver: { weight: 1 } } },
    },
    computations: {
      Gold: { input_rows_throttler_id: "api", input_rows_throttler_class_id: "gold" },
      Silver: { input_rows_throttler_id: "api", input_rows_throttler_class_id: "silver" },
      Plain: { input_rows_throttler_id: "api" },
    },
  };
}

it("controller /metrics agree with what the clients consumed and sent", { timeout: 300_000 }, async () => {
  const specPath = writeSpec({
    pipeline: "metered",
    streams: { input: { topic: "input" } },
    computations: Object.fromEntries(["Gold", "Silver", "Plain"].map((name) => [name, { module: NOOP_COMPUTATION, inputs: ["input"] }])),
    dynamic_spec: dynamicSpec(LIMIT),
  });
  const controller = sluice(["controller", specPath, "--port", "0", "--http-port", "0"]);
  children.push(controller);
  const address = `127.0.0.1:${(await controller.waitFor(/listening on 127\.0\.0\.1:(\d+)/))[1]}`;
  const base = `http://127.0.0.1:${(await controller.waitFor(/sluice controller: dashboard on http:\/\/127\.0\.0\.1:(\d+)\//))[1]}`;
  const metrics = `${base}/metrics`;

  assert.deepEqual(await get(`${base}/healthz`), { status: 200, type: "text/plain; charset=utf-8", body: "ok\n" });
  const idle = await scrape(metrics);
  assert.equal(idle.value("sluice_controller_throttler_limit", { throttler_id: "api" }), LIMIT);
  assert.equal(idle.value("sluice_controller_throttler_granted_total", { throttler_id: "api" }), 0);
  assert.equal(idle.value("sluice_controller_dynamic_spec_version"), 1);
  assert.equal(idle.value("sluice_controller_quota_class_weight", { quota_class: "gold" }), 3);
  assert.equal(idle.value("sluice_controller_quota_class_weight", { quota_class: "silver" }), 1);
  assert.equal(idle.value("sluice_controller_quota_class_weight", { quota_class: "default" }), 1);
  for (const [name, type] of [
    ["sluice_controller_throttler_granted_total", "counter"],
    ["sluice_controller_throttler_queue_size", "gauge"],
    ["sluice_controller_throttler_wait_time_ms", "histogram"],
    ["sluice_controller_throttler_wait_time_ms_max", "gauge"],
    ["sluice_controller_quota_class_wait_time_ms", "histogram"],
    ["sluice_controller_quota_class_pending_amount", "gauge"],
  ] as const) {
    assert.equal(idle.types.get(name), type, `${name} is a ${type}`);
    assert.ok((idle.help.get(name) ?? "").length > 10, `${name} has HELP`);
  }

  // Three clients, all backlogged for 4 s: 5 units per throttle() call, as fast as quota comes. They
  // start together once all three are ready (the start time on their stdin): a child takes seconds
  // to start on a loaded machine, and a start time fixed before would leave one behind.
  const durationMs = 4000;
  const clients = await Promise.all(
    ["Gold", "Silver", "Plain"].map(async (computation) => {
      const child = tsNode("test/fixtures/quota-client.ts", [
        JSON.stringify({ controller: address, computation, throttler: "api", clientId: `client-${computation}`, durationMs, amount: 5 }),
      ]);
      children.push(child);
      await child.waitFor(/"ready":true/);
      return { computation, child };
    }),
  );
  const startAt = Date.now() + 500;
  for (const { child } of clients) child.send(String(startAt));

  // During the run: the granted counter climbs at the limit and requests queue (sampled every 200 ms for 2 s).
  await sleepUntil(startAt + 1500);
  const firstSent = Date.now();
  const first = await scrape(metrics);
  const firstAt = Date.now();
  const waiting: number[] = [];
  let last = first;
  while (Date.now() < firstAt + 2000) {
    await sleepUntil(Date.now() + 200);
    last = await scrape(metrics);
    waiting.push(last.value("sluice_controller_throttler_queue_size", { throttler_id: "api" }));
  }
  const lastAt = Date.now();
  // The controller counted between the two scrapes' moments, somewhere inside [firstSent, lastAt]
  // and around [firstAt, lastAt]: the widest window bounds the rate from above, whatever a busy
  // machine did to the scrapes' round trips. Never faster than the limit plus one bucket (the
  // clients may have left quota in it while they started: limit × 1 s) and one overdraw of
  // pay-after; slower only if the clients starve.
  const count = granted(last) - granted(first);
  const most = LIMIT * ((lastAt - firstSent) / 1000) + LIMIT + 3 * 5;
  const rate = (count * 1000) / (lastAt - firstAt);
  assert.ok(count <= most, `granted_total climbed by ${count} in ${lastAt - firstSent} ms: more than limit ${LIMIT}/s and one bucket allow (${most})`);
  assert.ok(rate >= LIMIT * 0.5, `granted_total climbed at ${rate.toFixed(0)}/s during the run, limit ${LIMIT}/s`);
  // Each client has a refill waiting most of the time, and at most two (one sent ahead of demand).
  assert.ok(waiting.every((n) => n >= 0 && n <= 6) && waiting.some((n) => n > 0), `queue_size ${waiting.join(", ")} while 3 clients wait`);

  const results = new Map<string, ClientResult>();
  for (const { computation, child } of clients) {
    await child.exited;
    const result = JSON.parse(child.stdout.trim().split("\n").at(-1) ?? "{}") as ClientResult;
    assert.equal(result.error, null, `${computation}: ${result.error?.message}`);
    assert.equal(result.metrics.rpcFailures, 0);
    results.set(computation, result);
  }

  // What the test does itself: one request in a class the throttler does not declare, then a release.
  const probe = createGrpcQuotaClient(address);
  try {
    await probe.requestQuota(
      { throttlerId: "api", clientId: "probe", amount: 3, timestampMs: 0, quotaClassId: "platinum", requestId: "probe-1" },
      { deadlineAt: systemClock.now() + 10_000 },
    );
    await probe.releaseQuota({ throttlerId: "api", clientId: "probe", amount: 2, quotaClassId: "" }, { deadlineAt: systemClock.now() + 10_000 });
  } finally {
    probe.close();
  }

  const end = await scrape(metrics);
  const api = { throttler_id: "api" };
  const total = granted(end);
  // The probe took 3 and gave 2 back.
  const consumed = [...results.values()].reduce((sum, r) => sum + r.consumed, 0) + 3 - 2;
  const released = end.value("sluice_controller_throttler_released_total", api);
  // The clients exit right after their last call: what they had prefetched and not used (up to a
  // pool and one refill in flight each) was granted but not consumed, and may or may not have been
  // released before the process ended.
  const unused = total - released - consumed;
  assert.ok(released >= 2, `released_total ${released} counts the probe's release of 2`);
  assert.ok(
    unused >= 0 && unused <= 3 * 2 * PREFETCH_CAP,
    `granted ${total} − released ${released} − consumed ${consumed} = ${unused}: outside 0…${3 * 2 * PREFETCH_CAP}, the clients' prefetch`,
  );

  const classGranted = (quotaClass: string) => end.value("sluice_controller_quota_class_granted_total", { ...api, quota_class: quotaClass });
  assert.equal(classGranted("gold") + classGranted("silver") + classGranted("default"), total, "class counters add up to the throttler's");
  // Each class's counter is what its client consumed, plus at most that client's unused prefetch;
  // `default` served Plain (no class) and the probe (an undeclared class).
  for (const [quotaClass, used] of [
    ["gold", results.get("Gold")?.consumed ?? 0],
    ["silver", results.get("Silver")?.consumed ?? 0],
    ["default", (results.get("Plain")?.consumed ?? 0) + 3],
  ] as const) {
    const extra = classGranted(quotaClass) - used;
    assert.ok(extra >= 0 && extra <= 2 * PREFETCH_CAP, `class ${quotaClass}: granted ${classGranted(quotaClass)}, its clients consumed ${used}`);
  }

  // Every RequestQuota that was granted recorded one wait; a client may exit with one answer unseen.
  const rpcs = (computation: string) => results.get(computation)?.metrics.rpcCount ?? 0;
  const allRpcs = rpcs("Gold") + rpcs("Silver") + rpcs("Plain") + 1;
  const waits = end.value("sluice_controller_throttler_wait_time_ms_count", api);
  assert.ok(waits >= allRpcs && waits <= allRpcs + 3, `wait_time_ms_count ${waits} for ${allRpcs} RequestQuota calls`);
  const classWaits = (quotaClass: string) => end.value("sluice_controller_quota_class_wait_time_ms_count", { ...api, quota_class: quotaClass });
  assert.ok(classWaits("gold") >= rpcs("Gold") && classWaits("gold") <= rpcs("Gold") + 1, `gold waits ${classWaits("gold")} for ${rpcs("Gold")} RPCs`);
  assert.ok(classWaits("silver") >= rpcs("Silver") && classWaits("silver") <= rpcs("Silver") + 1);
  const maxWait = end.value("sluice_controller_throttler_wait_time_ms_max", api);
  const sumWait = end.value("sluice_controller_throttler_wait_time_ms_sum", api);
  assert.ok(maxWait > 0 && maxWait * waits >= sumWait, `max ${maxWait} ms bounds the mean wait ${sumWait / waits} ms`);

  // Plain names no class on a throttler with classes; the probe named one that is not declared.
  const classless = end.value("sluice_controller_throttler_classless_requests_total", api);
  assert.ok(classless >= rpcs("Plain") && classless <= rpcs("Plain") + 1, `classless_requests_total ${classless} for Plain's ${rpcs("Plain")} RPCs`);
  assert.equal(end.value("sluice_controller_throttler_unknown_class_requests_total", api), 1);
  assert.equal(end.value("sluice_controller_throttler_queue_size", api), 0, "nobody waits after the run");
  assert.equal(end.value("sluice_controller_quota_class_pending_requests", { ...api, quota_class: "gold" }), 0);
  assert.equal(end.value("sluice_controller_throttler_refused_requests_total", { ...api, reason: "queue_full" }), 0);

  // A reconfiguration shows at once: version 2, the new limit.
  const next = specPath.replace(/\.json$/, "-v2.json");
  writeFileSync(next, JSON.stringify({ dynamic_spec: dynamicSpec(50) }));
  const reconfigure = sluice(["reconfigure", next, "--controller", address]);
  children.push(reconfigure);
  assert.equal((await reconfigure.exited).code, 0, reconfigure.stderr);
  const after2 = await scrape(metrics);
  assert.equal(after2.value("sluice_controller_dynamic_spec_version"), 2);
  assert.equal(after2.value("sluice_controller_throttler_limit", api), 50);
  assert.equal(granted(after2), total, "a reconfiguration keeps the counters");

  controller.kill("SIGTERM");
  assert.equal((await controller.exited).code, 0);
});

function granted(exposition: Exposition): number {
  return exposition.value("sluice_controller_throttler_granted_total", { throttler_id: "api" });
}

async function sleepUntil(at: number): Promise<void> {
  await new Promise((resolve) => setTimeout(resolve, Math.max(0, at - Date.now())));
}
