import assert from "node:assert/strict";
import { request as httpRequest } from "node:http";
import { request as httpsRequest } from "node:https";
import { after, before, describe, it } from "node:test";
import { systemClock } from "@sluice/core";
import { validateDynamicSpec } from "@sluice/spec";
import { generateTestCertificates, type TestCertificates } from "../../../test/support/certificates.ts";
import { Controller, startControllerStatusServer } from "../src/index.ts";
import { startStatusServer, TOKEN_COOKIE, type RunningStatusServer } from "@sluice/status-http";

// The status endpoints behind https and a token: what a scraper with a header, a browser with a
// cookie, and someone with neither get.

const parsed = validateDynamicSpec({ throttlers: { api: { limit: 50 } } }, { computations: [] });
assert.ok(parsed.ok);
const controller = new Controller({ dynamicSpec: parsed.value, computations: [], clock: systemClock });
const TOKEN = "s3cret/with;odd=chars";
after(() => controller.close());

interface Answer {
  status: number;
  headers: Record<string, string | string[] | undefined>;
  body: string;
}

function call(url: string, options: { ca?: Buffer; headers?: Record<string, string> } = {}): Promise<Answer> {
  const request = url.startsWith("https:") ? httpsRequest : httpRequest;
  return new Promise((resolve, reject) => {
    const req = request(url, { timeout: 5_000, headers: options.headers ?? {}, ...(options.ca ? { ca: options.ca } : {}) }, (response) => {
      let body = "";
      response.on("data", (chunk: Buffer) => (body += chunk.toString()));
      response.on("end", () => resolve({ status: response.statusCode ?? 0, headers: response.headers, body }));
    });
    req.on("timeout", () => req.destroy(new Error(`GET ${url} timed out`)));
    req.on("error", reject);
    req.end();
  });
}

describe("status server with https and a token", () => {
  let certs: TestCertificates;
  let server: RunningStatusServer;
  let ca: Buffer;
  before(async () => {
    certs = generateTestCertificates();
    ca = certs.read(certs.caCert);
    server = await startControllerStatusServer({
      controller,
      port: 0,
      token: TOKEN,
      tls: { cert: certs.read(certs.serverCert), key: certs.read(certs.serverKey) },
    });
  });
  after(async () => {
    await server.close();
    certs.remove();
  });

  it("speaks https only, with the certificate given", async () => {
    assert.equal(server.url, `https://127.0.0.1:${server.port}/`);
    await assert.rejects(call(server.url), /self-signed|unable to verify|certificate/, "a client that does not trust the CA is refused");
    const plain = await call(server.url.replace("https:", "http:")).then(
      (answer) => `answered ${answer.status}`,
      (error: Error) => error.message,
    );
    assert.doesNotMatch(plain, /answered 200/, "plain http gets nothing from an https port");
  });

  it("refuses every path without the token, and says how to give it", async () => {
    for (const path of ["api/snapshot", "metrics", "healthz"]) {
      const answer = await call(`${server.url}${path}`, { ca });
      assert.equal(answer.status, 401, path);
      assert.equal(answer.headers["www-authenticate"], 'Bearer realm="sluice"');
      assert.match(answer.body, /Send "authorization: Bearer <token>".*\?token=<token>/);
      assert.doesNotMatch(answer.body, /s3cret/, "the refusal never shows the token");
    }
    const page = await call(server.url, { ca });
    assert.equal(page.status, 401);
    assert.match(page.body, /<form method="get" action="\/"><input type="password" name="token"/, "the page asks for the token");
    const wrong = await call(`${server.url}api/snapshot`, { ca, headers: { authorization: "Bearer guess" } });
    assert.equal(wrong.status, 401);
    assert.match(wrong.body, /does not carry this server's token/);
  });

  it("serves a bearer header", async () => {
    const metrics = await call(`${server.url}metrics`, { ca, headers: { authorization: `Bearer ${TOKEN}` } });
    assert.equal(metrics.status, 200);
    assert.match(metrics.body, /^sluice_controller_throttler_limit\{throttler_id="api"\} 50$/m);
  });

  it("turns ?token= into a Secure HttpOnly cookie and drops it from the address; the cookie then opens the dashboard and its snapshot", async () => {
    const entry = await call(`${server.url}?token=${encodeURIComponent(TOKEN)}&view=1`, { ca });
    assert.equal(entry.status, 303);
    assert.equal(entry.headers.location, "/?view=1", "the token leaves the address bar (and the history)");
    const setCookie = String(entry.headers["set-cookie"]);
    assert.match(setCookie, new RegExp(`^${TOKEN_COOKIE}=[^;]+; Path=/; HttpOnly; SameSite=Strict; Secure`));
    const cookie = setCookie.split(";")[0] ?? "";
    const page = await call(server.url, { ca, headers: { cookie } });
    assert.equal(page.status, 200);
    assert.match(page.body, /<title>Sluice/);
    const snapshot = await call(`${server.url}api/snapshot`, { ca, headers: { cookie: `other=1; ${cookie}` } });
    assert.equal(snapshot.status, 200);
    assert.equal((JSON.parse(snapshot.body) as { version: number }).version, 1);
    const wrongQuery = await call(`${server.url}?token=nope`, { ca });
    assert.equal(wrongQuery.status, 401);
    assert.equal(wrongQuery.headers["set-cookie"], undefined);
  });
});

describe("status server with a token and --metrics-open", () => {
  it("leaves /metrics and /healthz open and keeps the rest closed", async () => {
    const server = await startStatusServer({
      port: 0,
      token: "t",
      openMetrics: true,
      metrics: () => "up 1\n",
      dashboard: { page: "<title>Sluice</title>", snapshot: () => controller.snapshot() },
    });
    try {
      assert.equal(server.url.startsWith("http://"), true);
      assert.deepEqual([(await call(`${server.url}metrics`)).status, (await call(`${server.url}metrics`)).body], [200, "up 1\n"]);
      assert.equal((await call(`${server.url}healthz`)).status, 200);
      assert.equal((await call(`${server.url}api/snapshot`)).status, 401);
      assert.equal((await call(server.url)).status, 401);
    } finally {
      await server.close();
    }
  });
});
