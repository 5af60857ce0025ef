// services: processes, kafka
// TLS and tokens end to end, with certificates generated for this run (openssl): a real
// `sluice controller` serving gRPC with mutual TLS and its dashboard over https behind the token;
// `sluice top`, `sluice reconfigure` and `sluice run` (a spec whose controller section has tls) as
// clients; and every mismatch — plaintext, the wrong CA, no client certificate, a certificate of
// another CA — refused at once with what to check. A `sluice worker` over mTLS on the real Kafka
// broker (KAFKA_BROKERS). Every process is started here and ended by its own pid.
import assert from "node:assert/strict";
import { copyFileSync, writeFileSync } from "node:fs";
import { request } from "node:https";
import { dirname, join } from "node:path";
import { after, before, describe, it } from "node:test";
import { brokers, createTopic, produce, uniqueName } from "../support/kafka.ts";
import { exitCodeWithin, NOOP_COMPUTATION, ROOT, sluice, writeSpec, type Child } from "../support/processes.ts";
import { generateTestCertificates, type TestCertificates } from "../support/certificates.ts";

const TOKEN = "tls-e2e-token";
/**
 * A refused client exits at once; this bounds a hang. The bound covers the `sluice` process's own
 * start too, which takes tens of seconds on a loaded 2-core machine, and a client that retried
 * instead would give up after its retry budget well inside it: what the refusal messages below
 * check is what tells the two apart.
 */
const REFUSED_WITHIN_MS = 90_000;

const children: Child[] = [];
after(() => {
  for (const child of children) child.kill("SIGKILL");
});
function track(child: Child): Child {
  children.push(child);
  return child;
}

interface HttpsAnswer {
  status: number;
  headers: Record<string, string | string[] | undefined>;
  body: string;
}

function httpsGet(url: string, ca: Buffer, headers: Record<string, string> = {}): Promise<HttpsAnswer> {
  return new Promise((resolve, reject) => {
    const req = request(url, { ca, headers, timeout: 10_000 }, (response) => {
      let body = "";
      response.on("data", (chunk: Buffer) => (body += chunk.toString()));
      response.on("end", () => resolve({ status: response.statusCode ?? 0, headers: response.headers, body }));
    });
    req.on("timeout", () => req.destroy(new Error(`GET ${url} timed out`)));
    req.on("error", reject);
    req.end();
  });
}

interface Snapshot {
  version: number;
  throttlers: { id: string; limit: number | null; counters: { granted: number } }[];
}

describe("TLS and tokens", { timeout: 300_000 }, () => {
  let certs: TestCertificates;
  let spec: string;
  let mtls: { child: Child; address: string; dashboard: string };
  let tlsOnly: { child: Child; address: string };
  const clientFlags = () => ["--tls-ca", certs.caCert, "--tls-cert", certs.clientCert, "--tls-key", certs.clientKey, "--token", TOKEN];

  before(async () => {
    certs = generateTestCertificates();
    spec = writeSpec({
      pipeline: "tls-e2e",
      streams: { input: { topic: "tls-e2e-in" } },
      computations: { Noop: { module: NOOP_COMPUTATION, inputs: ["input"] } },
      dynamic_spec: { throttlers: { api: { limit: 100, period: "1s", request_period: "200ms" } }, computations: { Noop: { input_rows_throttler_id: "api" } } },
    });
    const server = ["--tls-cert", certs.serverCert, "--tls-key", certs.serverKey, "--token", TOKEN];
    const mtlsChild = track(sluice(["controller", spec, "--port", "0", ...server, "--tls-client-ca", certs.caCert, "--http-port", "0"]));
    const tlsChild = track(sluice(["controller", spec, "--port", "0", ...server]));
    const [line, port] = await mtlsChild.waitFor(/listening on 127\.0\.0\.1:(\d+) .*$/m);
    assert.match(line, /, token required, TLS with client certificates \(mTLS\)$/);
    const dashboard = (await mtlsChild.waitFor(/dashboard on (https:\/\/127\.0\.0\.1:\d+\/)/))[1] ?? "";
    mtls = { child: mtlsChild, address: `127.0.0.1:${port}`, dashboard };
    const tlsPort = (await tlsChild.waitFor(/listening on 127\.0\.0\.1:(\d+) .*, TLS$/m))[1];
    tlsOnly = { child: tlsChild, address: `127.0.0.1:${tlsPort}` };
  });
  after(() => certs.remove());

  /** Runs a CLI client to its end: exit code and output, failing the test if it hangs. */
  async function client(args: string[]): Promise<{ code: number | null; stdout: string; stderr: string; ms: number }> {
    const started = Date.now();
    const child = track(sluice(args));
    const code = await exitCodeWithin(child, REFUSED_WITHIN_MS);
    return { code, stdout: child.stdout, stderr: child.stderr, ms: Date.now() - started };
  }

  it("top --once over mutual TLS with the token", async () => {
    const top = await client(["top", "--controller", mtls.address, "--once", ...clientFlags()]);
    assert.equal(top.code, 0, top.stderr);
    assert.match(top.stdout, /^api\s+100\s/m);
  });

  it("reconfigure over mutual TLS, taking the client certificate from the spec's controller.tls", async () => {
    // A whole spec beside its certificates: controller.tls paths are relative to the spec file.
    const dir = dirname(spec);
    for (const [from, to] of [
      [certs.caCert, "ca.pem"],
      [certs.clientCert, "worker.pem"],
      [certs.clientKey, "worker.key"],
    ] as const)
      copyFileSync(from, join(dir, to));
    const update = join(dir, "update.json");
    writeFileSync(
      update,
      JSON.stringify({
        pipeline: "tls-e2e",
        controller: { address: mtls.address, tls: { ca: "./ca.pem", cert: "./worker.pem", key: "./worker.key", server_name: "localhost" } },
        streams: { input: { topic: "tls-e2e-in" } },
        computations: { Noop: { module: NOOP_COMPUTATION, inputs: ["input"] } },
        dynamic_spec: { throttlers: { api: { limit: 250, period: "1s" } }, computations: { Noop: { input_rows_throttler_id: "api" } } },
      }),
    );
    const applied = await client(["reconfigure", update, "--controller", mtls.address, "--token", TOKEN]);
    assert.equal(applied.code, 0, applied.stderr);
    assert.equal(applied.stdout, `dynamic_spec version 2 applied on ${mtls.address}\n`);
    const snapshot = await httpsGet(`${mtls.dashboard}api/snapshot`, certs.read(certs.caCert), { authorization: `Bearer ${TOKEN}` });
    assert.equal(snapshot.status, 200, snapshot.body);
    const body = JSON.parse(snapshot.body) as Snapshot;
    assert.deepEqual([body.version, body.throttlers.map((t) => [t.id, t.limit])], [2, [["api", 250]]]);
  });

  it("mTLS refuses a client without a certificate and one whose certificate another CA signed, naming the options", async () => {
    const without = await client(["top", "--controller", mtls.address, "--once", "--tls-ca", certs.caCert, "--token", TOKEN]);
    assert.equal(without.code, 1);
    assert.match(
      without.stderr,
      /UNAUTHENTICATED: the TLS connection to the controller at 127\.0\.0\.1:\d+ failed .*requires a client certificate .*pass --tls-cert and --tls-key/,
    );
    const stranger = await client([
      "reconfigure",
      spec,
      "--controller",
      mtls.address,
      "--tls-ca",
      certs.caCert,
      "--tls-cert",
      certs.strangerCert,
      "--tls-key",
      certs.strangerKey,
      "--token",
      TOKEN,
    ]);
    assert.equal(stranger.code, 1);
    assert.match(stranger.stderr, /check that --tls-cert \(controller\.tls\.cert\) is signed by that CA/);
    assert.match(stranger.stderr, /nothing was applied/);
  });

  it("a TLS controller refuses a plaintext client, and a client trusting the wrong CA refuses the controller", async () => {
    const plaintext = await client(["top", "--controller", tlsOnly.address, "--once", "--token", TOKEN]);
    assert.equal(plaintext.code, 1);
    assert.match(plaintext.stderr, /if the controller serves TLS \(--tls-cert\), connect with TLS \(--tls-ca <file>, or controller\.tls in the spec\)/);
    const wrongCa = await client(["top", "--controller", tlsOnly.address, "--once", "--tls-ca", certs.wrongCaCert, "--token", TOKEN]);
    assert.equal(wrongCa.code, 1);
    assert.match(wrongCa.stderr, /the controller's certificate is not signed by the CA of --tls-ca/);
    const noToken = await client(["top", "--controller", tlsOnly.address, "--once", "--tls-ca", certs.caCert]);
    assert.equal(noToken.code, 1);
    assert.match(noToken.stderr, /this controller requires a token/, "the token is still checked on top of TLS");
    const ok = await client(["top", "--controller", `localhost:${tlsOnly.address.split(":")[1]}`, "--once", "--tls-ca", certs.caCert, "--token", TOKEN]);
    assert.equal(ok.code, 0, ok.stderr);
  });

  it("an unreadable or mismatched TLS file stops a command before it starts, naming the flag and the file", async () => {
    const missing = await client(["controller", spec, "--port", "0", "--tls-cert", certs.serverCert, "--tls-key", join(certs.dir, "nope.key")]);
    assert.equal(missing.code, 1);
    assert.match(missing.stderr, /sluice controller: not started: --tls-key: cannot read .*nope\.key: no such file/);
    const mismatched = await client(["controller", spec, "--port", "0", "--tls-cert", certs.serverCert, "--tls-key", certs.clientKey]);
    assert.equal(mismatched.code, 1);
    assert.match(mismatched.stderr, /the server key does not belong to the server certificate .*--tls-cert .*server\.pem, --tls-key .*client\.key/);
  });

  it("the https dashboard: 401 with a sign-in page, ?token= sets a cookie that opens it", async () => {
    const ca = certs.read(certs.caCert);
    const refused = await httpsGet(mtls.dashboard, ca);
    assert.equal(refused.status, 401);
    assert.match(refused.body, /Token required/);
    assert.equal((await httpsGet(`${mtls.dashboard}metrics`, ca)).status, 401, "metrics are closed without --metrics-open");
    const entry = await httpsGet(`${mtls.dashboard}?token=${TOKEN}`, ca);
    assert.equal(entry.status, 303);
    const cookie = String(entry.headers["set-cookie"]).split(";")[0] ?? "";
    const page = await httpsGet(mtls.dashboard, ca, { cookie });
    assert.equal(page.status, 200);
    assert.match(page.body, /<title>Sluice · pipeline &#34;tls-e2e&#34;<\/title>/);
  });

  it("sluice run takes quota from the TLS controller named in its spec (controller.tls)", async () => {
    const dir = dirname(spec);
    const runSpec = join(dir, "run.json");
    writeFileSync(
      runSpec,
      JSON.stringify({
        pipeline: "tls-e2e",
        controller: { address: mtls.address, tls: { ca: "./ca.pem", cert: "./worker.pem", key: "./worker.key" } },
        streams: { input: { topic: "tls-e2e-in", generator: { module: `${ROOT}/test/fixtures/sequence-generator.ts`, messages: 60 } } },
        computations: { Noop: { module: NOOP_COMPUTATION, inputs: ["input"] } },
        dynamic_spec: { throttlers: { api: { limit: 250, period: "1s" } }, computations: { Noop: { input_rows_throttler_id: "api" } } },
      }),
    );
    const before = await grantedOnMtls();
    const run = track(sluice(["run", runSpec, "--drain", "--quiet"], { SLUICE_CONTROLLER_TOKEN: TOKEN }));
    assert.equal(await exitCodeWithin(run, 120_000), 0, run.stderr);
    const granted = (await grantedOnMtls()) - before;
    assert.ok(granted >= 60, `the controller granted ${granted} rows to the run (60 messages)`);
  });

  it("sluice run --controller-port serves its embedded controller with mutual TLS and the token", async () => {
    const run = track(
      sluice([
        "run",
        spec,
        "--quiet",
        "--controller-port",
        "0",
        "--tls-cert",
        certs.serverCert,
        "--tls-key",
        certs.serverKey,
        "--tls-client-ca",
        certs.caCert,
        "--token",
        TOKEN,
      ]),
    );
    const [line, address] = await run.waitFor(/embedded controller listening on (127\.0\.0\.1:\d+)[^\n]*/);
    assert.match(line, /\(token required, TLS with client certificates \(mTLS\)\)$/);
    const top = await client(["top", "--controller", address ?? "", "--once", ...clientFlags()]);
    assert.equal(top.code, 0, top.stderr);
    assert.match(top.stdout, /^api\s+100\s/m);
    const without = await client(["top", "--controller", address ?? "", "--once", "--tls-ca", certs.caCert, "--token", TOKEN]);
    assert.equal(without.code, 1);
    assert.match(without.stderr, /requires a client certificate/);
    run.kill("SIGTERM");
    assert.equal(await exitCodeWithin(run, 120_000), 0, run.stderr);
    const refused = await client(["run", spec, "--quiet", "--tls-cert", certs.serverCert, "--tls-key", certs.serverKey]);
    assert.equal(refused.code, 1);
    assert.match(refused.stderr, /serve the embedded controller's gRPC port: add --controller-port <port>/);
  });

  async function grantedOnMtls(): Promise<number> {
    const answer = await httpsGet(`${mtls.dashboard}api/snapshot`, certs.read(certs.caCert), { authorization: `Bearer ${TOKEN}` });
    return (JSON.parse(answer.body) as Snapshot).throttlers.find((t) => t.id === "api")?.counters.granted ?? Number.NaN;
  }

  it("sluice worker over mutual TLS on the real Kafka broker, with its metrics over https behind the token", async () => {
    const name = uniqueName("tls");
    await createTopic(`${name}-in`, 1);
    const dir = dirname(spec);
    const workerSpec = join(dir, "worker.json");
    writeFileSync(
      workerSpec,
      JSON.stringify({
        pipeline: name,
        kafka: { brokers: await brokers(), session_timeout: "6s" },
        controller: { address: mtls.address, tls: { ca: "./ca.pem", cert: "./worker.pem", key: "./worker.key" } },
        streams: { input: { topic: `${name}-in` } },
        computations: { Noop: { module: NOOP_COMPUTATION, inputs: ["input"] } },
        dynamic_spec: { throttlers: { api: { limit: 250, period: "1s" } }, computations: { Noop: { input_rows_throttler_id: "api" } } },
      }),
    );
    const worker = track(
      sluice([
        "worker",
        workerSpec,
        "--quiet",
        "--worker-id",
        "tls-w1",
        "--token",
        TOKEN,
        "--metrics-port",
        "0",
        "--metrics-tls-cert",
        certs.serverCert,
        "--metrics-tls-key",
        certs.serverKey,
      ]),
    );
    const metrics = (await worker.waitFor(/sluice worker: metrics on (https:\/\/127\.0\.0\.1:\d+\/metrics)/))[1] ?? "";
    await worker.waitFor(/started Noop/, 120_000, "stderr");
    const before = await grantedOnMtls();
    await produce(`${name}-in`, 40);
    const ca = certs.read(certs.caCert);
    const deadline = Date.now() + 60_000;
    let rows = 0;
    while (Date.now() < deadline) {
      const scrape = await httpsGet(metrics, ca, { authorization: `Bearer ${TOKEN}` });
      assert.equal(scrape.status, 200, scrape.body);
      rows = Number(/^sluice_worker_computation_rows_total\{[^}]*computation_id="Noop"[^}]*\} (\d+)$/m.exec(scrape.body)?.[1] ?? 0);
      if (rows >= 40) break;
      await new Promise((resolve) => setTimeout(resolve, 250));
    }
    assert.equal(rows, 40, "the worker processed every message");
    assert.ok((await grantedOnMtls()) - before >= 40, "with quota the mTLS controller granted");
    assert.equal((await httpsGet(metrics, ca)).status, 401, "the worker's metrics need the token");
    worker.kill("SIGTERM");
    assert.equal(await exitCodeWithin(worker, 120_000), 0, worker.stderr);
  });
});
