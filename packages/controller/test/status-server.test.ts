import assert from "node:assert/strict";
import { request } from "node:http";
import { after, describe, it } from "node:test";
import { systemClock } from "@sluice/core";
import { validateDynamicSpec } from "@sluice/spec";
import { Controller, startControllerStatusServer } from "../src/index.ts";
import { startStatusServer, type RunningStatusServer } from "@sluice/status-http";

// The HTTP endpoints on loopback: what each path answers, and what it refuses.

const parsed = validateDynamicSpec({ throttlers: { api: { limit: 50 } } }, { computations: [] });
assert.ok(parsed.ok);
const controller = new Controller({ dynamicSpec: parsed.value, computations: [], clock: systemClock });
const servers: RunningStatusServer[] = [];
after(async () => {
  for (const server of servers) await server.close();
  controller.close();
});

async function call(url: string, method = "GET"): Promise<{ status: number; headers: Record<string, string | string[] | undefined>; body: string }> {
  return new Promise((resolve, reject) => {
    const req = request(url, { method, timeout: 5_000 }, (response) => {
      let body = "";
      response.on("data", (chunk: Buffer) => (body += chunk.toString()));
      response.on("end", () => resolve({ status: response.statusCode ?? 0, headers: response.headers, body }));
    });
    req.on("timeout", () => req.destroy(new Error(`${method} ${url} timed out`)));
    req.on("error", reject);
    req.end();
  });
}

describe("status server", () => {
  it("serves the dashboard, the snapshot, the metrics and a health check", async () => {
    const server = await startControllerStatusServer({ controller, port: 0, title: 'pipeline "<demo>"' });
    servers.push(server);
    assert.equal(server.host, "127.0.0.1", "loopback unless asked");
    assert.equal(server.url, `http://127.0.0.1:${server.port}/`);

    const page = await call(server.url);
    assert.equal(page.status, 200);
    assert.equal(page.headers["content-type"], "text/html; charset=utf-8");
    assert.equal(page.headers["cache-control"], "no-store");
    assert.match(page.body, /<title>Sluice · pipeline &#34;&#60;demo&#62;&#34;<\/title>/, "the title is escaped into the page");
    assert.doesNotMatch(page.body, /<script src=|<link rel="stylesheet"|https?:\/\/(?!127)/, "self-contained: nothing to fetch from elsewhere");

    const snapshot = await call(`${server.url}api/snapshot`);
    assert.equal(snapshot.headers["content-type"], "application/json; charset=utf-8");
    const body = JSON.parse(snapshot.body) as { version: number; throttlers: { id: string; limit: number }[] };
    assert.deepEqual([body.version, body.throttlers.map((t) => [t.id, t.limit])], [1, [["api", 50]]]);

    const metrics = await call(`${server.url}metrics`);
    assert.equal(metrics.headers["content-type"], "text/plain; version=0.0.4; charset=utf-8");
    assert.match(metrics.body, /^sluice_controller_throttler_limit\{throttler_id="api"\} 50$/m);

    assert.deepEqual([(await call(`${server.url}healthz`)).body, (await call(`${server.url}healthz?probe=1`)).status], ["ok\n", 200]);
    const head = await call(`${server.url}metrics`, "HEAD");
    assert.deepEqual([head.status, head.body], [200, ""]);
  });

  it("answers 404 with what it has, and 405 for anything but GET and HEAD", async () => {
    const server = await startControllerStatusServer({ controller, port: 0 });
    servers.push(server);
    const missing = await call(`${server.url}nope`);
    assert.equal(missing.status, 404);
    assert.equal(missing.body, "nothing at /nope; this server has /, /api/snapshot, /metrics and /healthz\n");
    const post = await call(`${server.url}metrics`, "POST");
    assert.deepEqual([post.status, post.headers["allow"]], [405, "GET, HEAD"]);
  });

  it("without a snapshot (a worker) serves metrics and health only, and says where the dashboard is", async () => {
    const server = await startStatusServer({ port: 0, metrics: () => "# HELP x y\n# TYPE x gauge\nx 1\n" });
    servers.push(server);
    assert.equal((await call(`${server.url}metrics`)).body, "# HELP x y\n# TYPE x gauge\nx 1\n");
    const root = await call(server.url);
    assert.equal(root.status, 404);
    assert.match(root.body, /its dashboard is on the controller's --http-port/);
  });

  it("reports a failing metrics source as a 500 with the reason, and keeps serving", async () => {
    let fail = true;
    const server = await startStatusServer({
      port: 0,
      metrics: () => {
        if (fail) throw new Error("the worker is gone");
        return "";
      },
    });
    servers.push(server);
    const failed = await call(`${server.url}metrics`);
    assert.deepEqual([failed.status, failed.body], [500, "/metrics failed: the worker is gone\n"]);
    fail = false;
    assert.equal((await call(`${server.url}metrics`)).status, 200);
  });

  it("refuses a port in use with a sentence, and closes idempotently", async () => {
    const first = await startStatusServer({ port: 0, metrics: () => "" });
    await assert.rejects(startStatusServer({ port: first.port, metrics: () => "" }), {
      message: `cannot serve HTTP on 127.0.0.1:${first.port}: the port is in use`,
    });
    await Promise.all([first.close(), first.close()]);
    await assert.rejects(call(first.url), /ECONNREFUSED/);
  });
});
