import { execFileSync } from "node:child_process";
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";

/** Files of one generated set of test certificates (PEM), in a temp directory of their own. */
export interface TestCertificates {
  readonly dir: string;
  /** The CA that signed server and client. */
  readonly caCert: string;
  /** Server certificate for 127.0.0.1 and localhost (subjectAltName), signed by the CA. */
  readonly serverCert: string;
  readonly serverKey: string;
  /** Client certificate (CN=sluice-worker), signed by the CA: accepted under mTLS. */
  readonly clientCert: string;
  readonly clientKey: string;
  /** A second CA that signed nothing the servers use: trusting it must fail. */
  readonly wrongCaCert: string;
  /** A client certificate signed by the wrong CA: refused under mTLS. */
  readonly strangerCert: string;
  readonly strangerKey: string;
  read(file: string): Buffer;
  remove(): void;
}

/**
 * Generates a CA, a server certificate for 127.0.0.1/localhost, a client certificate, a wrong CA and
 * a client certificate of the wrong CA, with the machine's `openssl` (P-256 keys: fast to make).
 * Valid for two days, so a test run never meets an expired one.
 */
export function generateTestCertificates(): TestCertificates {
  const dir = mkdtempSync(join(tmpdir(), "sluice-tls-"));
  const path = (name: string) => join(dir, name);
  const openssl = (...args: string[]) => execFileSync("openssl", args, { cwd: dir, stdio: ["ignore", "ignore", "pipe"] });
  const key = (name: string) => openssl("genpkey", "-algorithm", "EC", "-pkeyopt", "ec_paramgen_curve:P-256", "-out", path(name));
  const selfSignedCa = (name: string, subject: string) => {
    key(`${name}.key`);
    openssl("req", "-x509", "-new", "-key", path(`${name}.key`), "-out", path(`${name}.pem`), "-days", "2", "-subj", subject);
  };
  const signed = (name: string, subject: string, ca: string, extensions: string) => {
    key(`${name}.key`);
    openssl("req", "-new", "-key", path(`${name}.key`), "-out", path(`${name}.csr`), "-subj", subject);
    writeFileSync(path(`${name}.ext`), extensions);
    openssl(
      "x509",
      "-req",
      "-in",
      path(`${name}.csr`),
      "-CA",
      path(`${ca}.pem`),
      "-CAkey",
      path(`${ca}.key`),
      "-CAcreateserial",
      "-out",
      path(`${name}.pem`),
      "-days",
      "2",
      "-extfile",
      path(`${name}.ext`),
    );
  };
  selfSignedCa("ca", "/CN=Sluice Test CA");
  selfSignedCa("wrong-ca", "/CN=Some Other CA");
  signed("server", "/CN=localhost", "ca", "subjectAltName=IP:127.0.0.1,DNS:localhost\nextendedKeyUsage=serverAuth\n");
  signed("client", "/CN=sluice-worker", "ca", "extendedKeyUsage=clientAuth\n");
  signed("stranger", "/CN=stranger", "wrong-ca", "extendedKeyUsage=clientAuth\n");
  return {
    dir,
    caCert: path("ca.pem"),
    serverCert: path("server.pem"),
    serverKey: path("server.key"),
    clientCert: path("client.pem"),
    clientKey: path("client.key"),
    wrongCaCert: path("wrong-ca.pem"),
    strangerCert: path("stranger.pem"),
    strangerKey: path("stranger.key"),
    read: (file) => readFileSync(file),
    remove: () => rmSync(dir, { recursive: true, force: true }),
  };
}
