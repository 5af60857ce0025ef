import assert from "node:assert/strict";
import { copyFileSync, mkdtempSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, before, describe, it } from "node:test";
import { generateTestCertificates, type TestCertificates } from "../../../test/support/certificates.ts";
import { httpEndpointWarning } from "../src/status-endpoints.ts";
import { isLoopbackHost, loadClientTls, loadHttpTls, loadServerTls } from "../src/tls-options.ts";

describe("TLS options of the CLI", () => {
  let certs: TestCertificates;
  before(() => {
    certs = generateTestCertificates();
  });
  after(() => certs.remove());

  it("no flag and no controller.tls = plaintext; an empty controller.tls = TLS with the system's roots", async () => {
    assert.equal(await loadClientTls({}), undefined);
    assert.equal(await loadClientTls({}, { tls: undefined, dir: certs.dir }), undefined);
    assert.deepEqual(await loadClientTls({}, { tls: {}, dir: certs.dir }), { ca: undefined, cert: undefined, key: undefined });
  });

  it("reads controller.tls relative to the spec file, and a flag replaces the same field", async () => {
    const specDir = mkdtempSync(join(tmpdir(), "sluice-spec-"));
    copyFileSync(certs.caCert, join(specDir, "ca.pem"));
    const fromSpec = await loadClientTls({}, { tls: { ca: "./ca.pem", server_name: "controller.internal" }, dir: specDir });
    assert.deepEqual(fromSpec?.ca, certs.read(certs.caCert));
    assert.equal(fromSpec?.serverName, "controller.internal");
    const overridden = await loadClientTls(
      { tlsCa: certs.wrongCaCert, tlsServerName: "localhost" },
      { tls: { ca: "./ca.pem", server_name: "x" }, dir: specDir },
    );
    assert.deepEqual(overridden?.ca, certs.read(certs.wrongCaCert));
    assert.equal(overridden?.serverName, "localhost");
    await assert.rejects(loadClientTls({}, { tls: { ca: "./missing.pem" }, dir: specDir }), /controller\.tls\.ca: cannot read .*missing\.pem: no such file/);
    await assert.rejects(loadClientTls({ tlsCert: certs.clientCert }), /needs its key/);
  });

  it("server flags: both of cert and key, a usable pair, a CA file that holds a certificate", async () => {
    assert.equal(await loadServerTls({}), undefined);
    const tls = await loadServerTls({ tlsCert: certs.serverCert, tlsKey: certs.serverKey, tlsClientCa: certs.caCert });
    assert.deepEqual(tls?.clientCa, certs.read(certs.caCert));
    await assert.rejects(loadServerTls({ tlsClientCa: certs.caCert }), /--tls-client-ca needs --tls-cert and --tls-key/);
    await assert.rejects(loadServerTls({ tlsCert: certs.serverCert }), /--tls-cert needs --tls-key/);
    await assert.rejects(
      loadServerTls({ tlsCert: certs.serverCert, tlsKey: certs.serverKey, tlsClientCa: certs.serverKey }),
      /client CA file holds no PEM certificate .*\(--tls-cert .*, --tls-client-ca .*server\.key\)/,
    );
  });

  it("https of a status server: its own pair, else the gRPC server's", async () => {
    const grpc = await loadServerTls({ tlsCert: certs.serverCert, tlsKey: certs.serverKey });
    const names = { cert: "--http-tls-cert", key: "--http-tls-key" };
    assert.deepEqual(await loadHttpTls({}, names, grpc), { cert: grpc?.cert, key: grpc?.key });
    assert.equal(await loadHttpTls({}, names), undefined);
    await assert.rejects(loadHttpTls({ cert: certs.serverCert }, names), /--http-tls-cert needs --http-tls-key beside it/);
    await assert.rejects(loadHttpTls({ cert: certs.serverCert, key: certs.clientKey }, names), /does not belong/);
  });

  it("warns about a token in clear only beyond loopback and without TLS", () => {
    assert.deepEqual(["127.0.0.1", "127.1.2.3", "localhost", "::1", "[::1]", "0.0.0.0", "10.0.0.5", "::"].map(isLoopbackHost), [
      true,
      true,
      true,
      true,
      true,
      false,
      false,
      false,
    ]);
    const cert = { cert: Buffer.from(""), key: Buffer.from("") };
    assert.equal(httpEndpointWarning({ host: "0.0.0.0", port: 0 }, "x", "--f"), undefined, "no token, nothing to leak");
    assert.equal(httpEndpointWarning({ host: "127.0.0.1", port: 0, token: "t" }, "x", "--f"), undefined);
    assert.equal(httpEndpointWarning({ host: "0.0.0.0", port: 0, token: "t", tls: cert }, "x", "--f"), undefined);
    assert.match(
      httpEndpointWarning({ host: "0.0.0.0", port: 0, token: "t" }, "the --http-port server", "--http-tls-cert") ?? "",
      /^warning: the --http-port server listens on 0\.0\.0\.0 without TLS: the token .* in clear; add --http-tls-cert/,
    );
  });
});
