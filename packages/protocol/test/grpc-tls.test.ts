import assert from "node:assert/strict";
import { after, before, describe, it } from "node:test";
import { isSluiceError, type SluiceError } from "@sluice/core";
import { generateTestCertificates, type TestCertificates } from "../../../test/support/certificates.ts";
import { clientTlsProblem, createGrpcQuotaClient, serveQuotaService, serverTlsProblem, type GrpcQuotaClientOptions, type QuotaServer } from "../src/index.ts";
import { StubHandler } from "./stub-handler.ts";

// Real TLS over loopback with certificates generated for this run: what each mismatch looks like to
// the caller, and that each one fails at once instead of waiting for a deadline.

/**
 * Generous: every refusal here is local and immediate; the deadline only bounds a hang, and a refusal
 * is told from a hang by coming in under half of it, however much a loaded machine slows the
 * handshake.
 */
const CALL_DEADLINE_MS = 60_000;
const FAILS_WITHIN_MS = CALL_DEADLINE_MS / 2;

describe("gRPC over TLS", () => {
  let certs: TestCertificates;
  let tlsServer: QuotaServer;
  let mtlsServer: QuotaServer;
  let plainServer: QuotaServer;
  const handler = new StubHandler();

  before(async () => {
    certs = generateTestCertificates();
    const server = { cert: certs.read(certs.serverCert), key: certs.read(certs.serverKey) };
    tlsServer = await serveQuotaService(handler, { port: 0, token: "secret", tls: server });
    mtlsServer = await serveQuotaService(handler, { port: 0, tls: { ...server, clientCa: certs.read(certs.caCert) } });
    plainServer = await serveQuotaService(handler, { port: 0 });
  });
  after(async () => {
    await Promise.all([tlsServer.close({ graceMs: 100 }), mtlsServer.close({ graceMs: 100 }), plainServer.close({ graceMs: 100 })]);
    certs.remove();
  });

  /** One DescribeThrottlers call: its answer, or the SluiceError it failed with and how long that took. */
  async function describeWith(address: string, options: GrpcQuotaClientOptions): Promise<{ ok: true } | { ok: false; error: SluiceError; ms: number }> {
    const client = createGrpcQuotaClient(address, options);
    const started = Date.now();
    try {
      await client.describeThrottlers({ deadlineAt: Date.now() + CALL_DEADLINE_MS });
      return { ok: true };
    } catch (error) {
      assert.ok(isSluiceError(error), `a SluiceError, got ${String(error)}`);
      return { ok: false, error, ms: Date.now() - started };
    } finally {
      client.close();
    }
  }

  function refused(result: Awaited<ReturnType<typeof describeWith>>): SluiceError {
    assert.equal(result.ok, false, "the call must be refused");
    if (result.ok) throw new Error("unreachable");
    assert.ok(result.ms < FAILS_WITHIN_MS, `refused within ${FAILS_WITHIN_MS} ms, took ${result.ms} ms (no hang until the deadline)`);
    return result.error;
  }

  it("serves a client that trusts the CA, with the bearer token on top", async () => {
    assert.deepEqual(await describeWith(tlsServer.address, { token: "secret", tls: { ca: certs.read(certs.caCert) } }), { ok: true });
    assert.deepEqual(await describeWith(`localhost:${tlsServer.port}`, { token: "secret", tls: { ca: certs.read(certs.caCert) } }), { ok: true });
    const noToken = refused(await describeWith(tlsServer.address, { tls: { ca: certs.read(certs.caCert) } }));
    assert.equal(noToken.code, "UNAUTHENTICATED");
    assert.match(noToken.message, /requires a token/);
  });

  it("refuses a plaintext client, naming the TLS options to check", async () => {
    const error = refused(await describeWith(tlsServer.address, { token: "secret" }));
    // Ambiguous with a controller going down mid-connect, so it stays retriable; the hint says what to check.
    assert.equal(error.code, "CONTROLLER_UNAVAILABLE");
    assert.match(error.message, /if the controller serves TLS \(--tls-cert\), connect with TLS \(--tls-ca <file>, or controller\.tls in the spec\)/);
  });

  it("refuses a client that trusts the wrong CA, at once and without retrying", async () => {
    const error = refused(await describeWith(tlsServer.address, { token: "secret", tls: { ca: certs.read(certs.wrongCaCert) } }));
    assert.equal(error.code, "UNAUTHENTICATED");
    assert.equal(error.retriable, false);
    assert.match(error.message, /not signed by the CA of --tls-ca \(controller\.tls\.ca\)/);
    assert.match(error.message, new RegExp(`controller at 127\\.0\\.0\\.1:${tlsServer.port}`));
  });

  it("refuses a certificate that does not name the server, pointing at --tls-server-name", async () => {
    const error = refused(
      await describeWith(tlsServer.address, { token: "secret", tls: { ca: certs.read(certs.caCert), serverName: "controller.elsewhere" } }),
    );
    assert.equal(error.code, "UNAUTHENTICATED");
    assert.match(error.message, /does not name the host connected to.*--tls-server-name \(controller\.tls\.server_name\)/);
  });

  it("a TLS client of a plaintext server is told the port does not speak TLS", async () => {
    const error = refused(await describeWith(plainServer.address, { tls: { ca: certs.read(certs.caCert) } }));
    assert.equal(error.code, "UNAUTHENTICATED");
    assert.match(error.message, /does not speak TLS on that port/);
  });

  it("mutual TLS: accepts a certificate of the client CA, refuses none and one of another CA", async () => {
    const ca = certs.read(certs.caCert);
    assert.deepEqual(await describeWith(mtlsServer.address, { tls: { ca, cert: certs.read(certs.clientCert), key: certs.read(certs.clientKey) } }), {
      ok: true,
    });
    const without = refused(await describeWith(mtlsServer.address, { tls: { ca } }));
    assert.equal(without.code, "UNAUTHENTICATED");
    assert.match(without.message, /requires a client certificate .*pass --tls-cert and --tls-key/);
    const stranger = refused(await describeWith(mtlsServer.address, { tls: { ca, cert: certs.read(certs.strangerCert), key: certs.read(certs.strangerKey) } }));
    // TLS 1.3: the server refuses the certificate after the client's side of the handshake is done.
    assert.equal(stranger.code, "CONTROLLER_UNAVAILABLE");
    assert.match(stranger.message, /check that --tls-cert \(controller\.tls\.cert\) is signed by that CA/);
    assert.equal(handler.requests.length, 0, "no refused client reached the handler");
  });

  it("names the part of the TLS material that cannot be used, before anything listens or connects", async () => {
    const cert = certs.read(certs.serverCert);
    const key = certs.read(certs.serverKey);
    assert.equal(serverTlsProblem({ cert, key, clientCa: certs.read(certs.caCert) }), undefined);
    assert.match(serverTlsProblem({ cert, key: certs.read(certs.clientKey) }) ?? "", /the server key does not belong to the server certificate/);
    assert.match(serverTlsProblem({ cert: key, key }) ?? "", /server certificate file holds no PEM certificate/);
    assert.match(serverTlsProblem({ cert, key, clientCa: Buffer.from("not a certificate") }) ?? "", /client CA file holds no PEM certificate/);
    assert.match(clientTlsProblem({ cert: certs.read(certs.clientCert) }) ?? "", /needs its key/);
    await assert.rejects(
      serveQuotaService(handler, { port: 0, tls: { cert, key: certs.read(certs.clientKey) } }),
      /cannot serve TLS: the server key does not belong/,
    );
    assert.throws(
      () => createGrpcQuotaClient(tlsServer.address, { tls: { ca: Buffer.from("junk") } }),
      /cannot connect with TLS: the CA file holds no PEM certificate/,
    );
  });
});
