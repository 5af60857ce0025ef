// services: processes
// @sluice/client's connectThrottlers in a plain Node process (this one) against a real
// `sluice controller` child over gRPC on 127.0.0.1: the rate it is held to, live reconfiguration
// with stable handles, and the token. Rates are checked with generous, stated tolerances.
import assert from "node:assert/strict";
import { after, describe, it } from "node:test";
import { connectThrottlers, type Throttlers } from "@sluice/client";
import { isSluiceError } from "@sluice/core";
import { createGrpcQuotaClient } from "@sluice/protocol";
import { type Child, NOOP_COMPUTATION, sluice, startController, writeSpec } from "../support/processes.ts";
import { generateTestCertificates } from "../support/certificates.ts";

const LIMIT = 20;

const children: Child[] = [];
const open: Throttlers[] = [];
after(async () => {
  await Promise.all(open.map((t) => t.close()));
  for (const child of children) child.kill("SIGKILL");
});

function dynamicSpec(throttlers: Record<string, unknown>) {
  return { throttlers, computations: {} };
}

function specFile(throttlers: Record<string, unknown>): string {
  return writeSpec({
    pipeline: "standalone",
    streams: { input: { topic: "input" } },
    computations: { Reader: { module: NOOP_COMPUTATION, inputs: ["input"] } },
    dynamic_spec: dynamicSpec(throttlers),
  });
}

async function until(condition: () => boolean, timeoutMs: number, what: string): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!condition()) {
    if (Date.now() > deadline) throw new Error(`${what}: not within ${timeoutMs} ms`);
    await new Promise((resolve) => setTimeout(resolve, 20));
  }
}

describe("connectThrottlers against a real controller", () => {
  it("holds a plain caller to the throttler's limit, follows a reconfiguration live, and keeps its handle", async () => {
    const { child, address } = await startController(specFile({ external_api: { limit: LIMIT, period: "1s" } }));
    children.push(child);
    const throttlers = await connectThrottlers({ controller: address, clientId: "billing-1", log: null });
    open.push(throttlers);
    const api = throttlers.getThrottlerOrThrow("external_api");

    // Starts full (capacity limit × period), then refills at `limit`: over T seconds at most
    // LIMIT + LIMIT × T units can be granted in all; a loaded machine may deliver less, not more.
    const startedAt = Date.now();
    let consumed = 0;
    while (Date.now() - startedAt < 3_000) {
      await api.throttle(1);
      consumed += 1;
    }
    const seconds = (Date.now() - startedAt) / 1000;
    assert.ok(consumed <= LIMIT + LIMIT * seconds + 1, `${consumed} units in ${seconds.toFixed(2)} s exceeds ${LIMIT} + ${LIMIT}/s`);
    assert.ok(consumed >= 0.7 * LIMIT * seconds, `${consumed} units in ${seconds.toFixed(2)} s is far below ${LIMIT}/s`);

    // Another operator reconfigures: a new throttler appears, the old handle keeps working.
    const admin = createGrpcQuotaClient(address);
    try {
      const { version } = await admin.updateDynamicSpec(JSON.stringify(dynamicSpec({ external_api: { limit: 1000, period: "1s" }, reports: { limit: 5 } })));
      await until(() => throttlers.dynamicSpecVersion === version, 10_000, `dynamic_spec version ${version} reaching the client`);
    } finally {
      admin.close();
    }
    assert.notEqual(throttlers.tryGetThrottler("reports"), null);
    assert.equal(throttlers.getThrottlerOrThrow("external_api"), api, "the handle survives reconfiguration");
    const fastStart = Date.now();
    for (let i = 0; i < 200; i++) await api.throttle(1);
    assert.ok(Date.now() - fastStart < 5_000, `200 units at limit 1000/s took ${Date.now() - fastStart} ms`);
    assert.equal(api.metrics().consumed, consumed + 200);

    assert.throws(
      () => throttlers.getThrottlerOrThrow("nope"),
      (error: unknown) => isSluiceError(error, "THROTTLER_NOT_DECLARED") && /declared: "external_api", "reports"/.test(error.message),
    );
    await throttlers.close();
    await assert.rejects(api.throttle(1), (error: unknown) => isSluiceError(error));
  });

  it("is refused with UNAUTHENTICATED without the controller's token, and served with it", async () => {
    const token = `t-${process.pid}-${Date.now()}`;
    const child = sluice(["controller", specFile({ external_api: { limit: 100 } }), "--port", "0", "--token", token]);
    children.push(child);
    const address = `127.0.0.1:${(await child.waitFor(/listening on 127\.0\.0\.1:(\d+)/))[1]}`;

    await assert.rejects(connectThrottlers({ controller: address, clientId: "billing-2", token: "wrong", log: null }), (error: unknown) => {
      assert.ok(isSluiceError(error, "UNAUTHENTICATED"), String(error));
      return true;
    });
    const throttlers = await connectThrottlers({ controller: address, clientId: "billing-2", token, log: null });
    open.push(throttlers);
    await throttlers.getThrottlerOrThrow("external_api").throttle(1);
    await throttlers.close();
  });

  it("connects over mutual TLS with the tls option, and is refused without a client certificate", async () => {
    const certs = generateTestCertificates();
    try {
      const child = sluice([
        "controller",
        specFile({ external_api: { limit: 100 } }),
        "--port",
        "0",
        "--tls-cert",
        certs.serverCert,
        "--tls-key",
        certs.serverKey,
        "--tls-client-ca",
        certs.caCert,
      ]);
      children.push(child);
      const address = `127.0.0.1:${(await child.waitFor(/listening on 127\.0\.0\.1:(\d+)/))[1]}`;
      const tls = { ca: certs.read(certs.caCert), cert: certs.read(certs.clientCert), key: certs.read(certs.clientKey) };
      const throttlers = await connectThrottlers({ controller: address, clientId: "billing-tls", tls, log: null });
      open.push(throttlers);
      await throttlers.getThrottlerOrThrow("external_api").throttle(1);
      await throttlers.close();

      await assert.rejects(
        connectThrottlers({ controller: address, clientId: "billing-tls", tls: { ca: tls.ca }, connectTimeoutMs: 5_000, log: null }),
        (error: unknown) => {
          assert.ok(isSluiceError(error), String(error));
          assert.ok(error.code === "UNAUTHENTICATED" || error.code === "CONTROLLER_UNAVAILABLE", error.message);
          return true;
        },
      );
    } finally {
      certs.remove();
    }
  });

  it("gives up with CONTROLLER_UNAVAILABLE when nothing listens, naming the address", async () => {
    // A port that was free a moment ago: a server bound and closed again.
    const { createServer } = await import("node:net");
    const server = createServer();
    await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
    const port = (server.address() as { port: number }).port;
    await new Promise<void>((resolve) => server.close(() => resolve()));
    await assert.rejects(
      connectThrottlers({ controller: `127.0.0.1:${port}`, clientId: "billing-3", connectTimeoutMs: 1_000, log: null }),
      (error: unknown) => {
        assert.ok(isSluiceError(error, "CONTROLLER_UNAVAILABLE"), String(error));
        assert.match(error.message, new RegExp(`127\\.0\\.0\\.1:${port} within 1000 ms`));
        return true;
      },
    );
  });
});
