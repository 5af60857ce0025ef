import { credentials, ServerCredentials, type ChannelCredentials, type ChannelOptions } from "@grpc/grpc-js";
import { X509Certificate } from "node:crypto";
import { createSecureContext } from "node:tls";

// TLS for the controller's gRPC port. The options carry PEM contents, not file names: where they
// come from (CLI flags, a spec's controller.tls, a secret store) is the caller's business, and a
// future `@sluice/client` (docs/design.md §14) passes the same shapes.

/** How a client reaches a controller that serves TLS. */
export interface ClientTlsOptions {
  /** PEM of the CA(s) that signed the controller's certificate; absent = the system's trusted roots. */
  readonly ca?: Buffer | undefined;
  /** PEM certificate chain this client presents, for a controller that requires client certificates (mTLS). */
  readonly cert?: Buffer | undefined;
  /** PEM private key of `cert`. */
  readonly key?: Buffer | undefined;
  /**
   * The name the controller's certificate must carry, when it differs from the host of the address
   * (e.g. connecting to 10.0.0.5:7070 whose certificate names controller.internal).
   */
  readonly serverName?: string | undefined;
}

/** What a controller presents, and optionally whom it accepts. */
export interface ServerTlsOptions {
  /** PEM certificate chain of the server. */
  readonly cert: Buffer;
  /** PEM private key of `cert`. */
  readonly key: Buffer;
  /** PEM of the CA(s) client certificates must be signed by; set = mutual TLS, clients without one are refused. */
  readonly clientCa?: Buffer | undefined;
}

/**
 * What is wrong with a client's TLS material, as a sentence naming the part (undefined = usable).
 * Checked up front because OpenSSL would otherwise say it later, per connection, in its own words.
 */
export function clientTlsProblem(tls: ClientTlsOptions): string | undefined {
  if ((tls.cert === undefined) !== (tls.key === undefined)) {
    return "a client certificate needs its key and a key its certificate: give both the TLS cert and key, or neither";
  }
  return (
    (tls.ca !== undefined ? certificateProblem("CA", tls.ca) : undefined) ??
    (tls.cert !== undefined && tls.key !== undefined ? pairProblem("client", tls.cert, tls.key) : undefined)
  );
}

/** What is wrong with a server's TLS material, as a sentence naming the part (undefined = usable). */
export function serverTlsProblem(tls: ServerTlsOptions): string | undefined {
  return pairProblem("server", tls.cert, tls.key) ?? (tls.clientCa !== undefined ? certificateProblem("client CA", tls.clientCa) : undefined);
}

function certificateProblem(role: string, pem: Buffer): string | undefined {
  // createSecureContext accepts a CA file without a single certificate in it (and trusts nothing).
  if (!pem.includes("-----BEGIN CERTIFICATE-----")) return `the ${role} file holds no PEM certificate ("-----BEGIN CERTIFICATE-----")`;
  try {
    new X509Certificate(pem);
    return undefined;
  } catch (error) {
    return `the ${role} certificate cannot be read: ${reason(error)}`;
  }
}

function pairProblem(role: string, cert: Buffer, key: Buffer): string | undefined {
  const unreadable = certificateProblem(`${role} certificate`, cert);
  if (unreadable !== undefined) return unreadable;
  try {
    createSecureContext({ cert, key });
    return undefined;
  } catch (error) {
    const code = (error as { code?: unknown }).code;
    if (code === "ERR_OSSL_X509_KEY_VALUES_MISMATCH") return `the ${role} key does not belong to the ${role} certificate (key values mismatch)`;
    return `the ${role} key cannot be used: ${reason(error)} (a PEM private key is expected, unencrypted)`;
  }
}

function reason(error: unknown): string {
  return error instanceof Error ? error.message : String(error);
}

/** Channel credentials and the options that go with them (the server-name override). */
export function clientChannelCredentials(tls: ClientTlsOptions | undefined): { credentials: ChannelCredentials; options: ChannelOptions } {
  if (tls === undefined) return { credentials: credentials.createInsecure(), options: {} };
  const problem = clientTlsProblem(tls);
  if (problem !== undefined) throw new TypeError(`cannot connect with TLS: ${problem}`);
  return {
    credentials: credentials.createSsl(tls.ca ?? null, tls.key ?? null, tls.cert ?? null),
    // grpc-js checks the certificate against this name and sends it as SNI.
    options: tls.serverName !== undefined ? { "grpc.ssl_target_name_override": tls.serverName, "grpc.default_authority": tls.serverName } : {},
  };
}

export function serverCredentials(tls: ServerTlsOptions | undefined): ServerCredentials {
  if (tls === undefined) return ServerCredentials.createInsecure();
  const problem = serverTlsProblem(tls);
  if (problem !== undefined) throw new TypeError(`cannot serve TLS: ${problem}`);
  return ServerCredentials.createSsl(tls.clientCa ?? null, [{ cert_chain: tls.cert, private_key: tls.key }], tls.clientCa !== undefined);
}

/** What a failed connection says about the TLS options, for the person reading the error. */
export interface ConnectionDiagnosis {
  /** What to check, appended to the message. */
  readonly hint: string;
  /**
   * A mismatch that no retry can fix (an untrusted certificate, a refused client certificate, TLS
   * spoken to a plaintext port): reported as UNAUTHENTICATED so that a worker fails at once instead
   * of retrying for its whole retry_timeout. Ambiguous symptoms stay CONTROLLER_UNAVAILABLE.
   */
  readonly settled: boolean;
}

/**
 * grpc-js's words for a connection that the other side closed or reset before HTTP/2 started; which
 * one depends on timing (whether the close or the reset arrives first), so they are read alike.
 */
const CLOSED_BEFORE_HTTP2 = /last error: (failed to connect|read econnreset|socket hang up|client network socket disconnected)/;

/**
 * Reads grpc-js's "Last error" text of a connection that never got as far as HTTP/2. gRPC reports
 * every such failure as UNAVAILABLE; the texts below are Node's TLS and OpenSSL messages.
 */
export function diagnoseConnection(tls: ClientTlsOptions | undefined, details: string): ConnectionDiagnosis | undefined {
  const text = details.toLowerCase();
  if (tls === undefined) {
    // The TCP connection was accepted and then closed before the server's HTTP/2 settings came:
    // what a TLS port does with a plaintext HTTP/2 preface. A controller shutting down at that very
    // moment looks the same, so this one is retried.
    if (CLOSED_BEFORE_HTTP2.test(text)) {
      return {
        hint: "the port accepted the connection but closed it before HTTP/2 started: if the controller serves TLS (--tls-cert), connect with TLS (--tls-ca <file>, or controller.tls in the spec)",
        settled: false,
      };
    }
    return undefined;
  }
  if (/altname|does not match certificate|hostname\/ip/.test(text)) {
    return {
      hint: "the controller's certificate does not name the host connected to: connect by a name it carries, or set --tls-server-name (controller.tls.server_name)",
      settled: true,
    };
  }
  if (/self[- ]signed|unable to (get|verify)|certificate verify failed|certificate has expired|not yet valid/.test(text)) {
    return {
      hint:
        tls.ca !== undefined
          ? "the controller's certificate is not signed by the CA of --tls-ca (controller.tls.ca): give the CA that signed the controller's --tls-cert, and check that the certificate has not expired"
          : "the controller's certificate is not trusted by this system's roots: give the CA that signed it as --tls-ca (controller.tls.ca)",
      settled: true,
    };
  }
  if (text.includes("certificate required")) {
    return {
      hint: "the controller requires a client certificate (it runs with --tls-client-ca): pass --tls-cert and --tls-key (controller.tls.cert and .key)",
      settled: true,
    };
  }
  if (/unknown ca|bad certificate|certificate unknown|unsupported certificate|decrypt error/.test(text)) {
    return {
      hint: "the controller refused this client's certificate: --tls-cert (controller.tls.cert) must be signed by the CA the controller trusts (its --tls-client-ca)",
      settled: true,
    };
  }
  if (/wrong version number|packet length too long|unexpected eof|http request/.test(text)) {
    return {
      hint: "the controller does not speak TLS on that port: start it with --tls-cert and --tls-key, or connect without TLS options",
      settled: true,
    };
  }
  if (CLOSED_BEFORE_HTTP2.test(text)) {
    // Under TLS 1.3 a server checks the client's certificate after the client finished its side of
    // the handshake, so a refused certificate shows as a connection closed before HTTP/2.
    return {
      hint:
        tls.cert !== undefined
          ? "the controller closed the connection after the TLS handshake: if it requires client certificates (--tls-client-ca), check that --tls-cert (controller.tls.cert) is signed by that CA"
          : "the controller closed the connection after the TLS handshake: if it requires client certificates (--tls-client-ca), pass --tls-cert and --tls-key (controller.tls.cert and .key)",
      settled: false,
    };
  }
  return undefined;
}
