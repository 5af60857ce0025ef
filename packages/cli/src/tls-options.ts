import type { ClientTlsOptions, ServerTlsOptions } from "@sluice/protocol";
import { clientTlsProblem, serverTlsProblem } from "@sluice/protocol";
import type { ControllerTlsSpec } from "@sluice/spec";
import { readFile } from "node:fs/promises";
import { resolve } from "node:path";

export { CLIENT_TLS_OPTIONS, SERVER_TLS_OPTIONS } from "./command-options.ts";

// The TLS flags of every command, in one place so that they are spelt and explained alike:
//   servers (controller, run --controller-port): --tls-cert --tls-key [--tls-client-ca]
//   clients (worker, reconfigure, top):          --tls-ca [--tls-cert --tls-key] [--tls-server-name]
//   HTTP status servers:                         --http-tls-cert/--http-tls-key (worker: --metrics-tls-*)
// Files are read here and handed on as PEM contents; a file that cannot be read or used is named,
// with its flag, before anything listens or connects.

export interface ServerTlsFlags {
  readonly tlsCert?: string;
  readonly tlsKey?: string;
  readonly tlsClientCa?: string;
}

export interface ClientTlsFlags {
  readonly tlsCa?: string;
  readonly tlsCert?: string;
  readonly tlsKey?: string;
  readonly tlsServerName?: string;
}

/** A TLS option that cannot be used: the message names the flag (or spec path) and the file. */
export class TlsOptionError extends Error {}

export interface HttpTlsFlags {
  readonly cert?: string | undefined;
  readonly key?: string | undefined;
}

/** `--tls-cert/--tls-key/--tls-client-ca` as ServerTlsOptions; undefined when none is given. */
export async function loadServerTls(flags: ServerTlsFlags): Promise<ServerTlsOptions | undefined> {
  if (flags.tlsCert === undefined && flags.tlsKey === undefined && flags.tlsClientCa === undefined) return undefined;
  if (flags.tlsCert === undefined || flags.tlsKey === undefined) {
    throw new TlsOptionError(
      flags.tlsCert === undefined
        ? `${flags.tlsKey !== undefined ? "--tls-key" : "--tls-client-ca"} needs --tls-cert and --tls-key: the server's own certificate and key`
        : "--tls-cert needs --tls-key (the certificate's private key)",
    );
  }
  const tls: ServerTlsOptions = {
    cert: await readPem("--tls-cert", flags.tlsCert),
    key: await readPem("--tls-key", flags.tlsKey),
    ...(flags.tlsClientCa !== undefined ? { clientCa: await readPem("--tls-client-ca", flags.tlsClientCa) } : {}),
  };
  const problem = serverTlsProblem(tls);
  if (problem !== undefined) throw new TlsOptionError(`${problem} (${describeFiles(flags)})`);
  return tls;
}

/**
 * The client's TLS: the flags, each over the same field of the spec's controller.tls (whose paths
 * are relative to the spec file). TLS is on when the spec has a controller.tls section or any flag
 * is given; undefined means plaintext.
 */
export async function loadClientTls(flags: ClientTlsFlags, spec?: { tls: ControllerTlsSpec | undefined; dir: string }): Promise<ClientTlsOptions | undefined> {
  const fromSpec = spec?.tls;
  const anyFlag = flags.tlsCa !== undefined || flags.tlsCert !== undefined || flags.tlsKey !== undefined || flags.tlsServerName !== undefined;
  if (fromSpec === undefined && !anyFlag) return undefined;
  const dir = spec?.dir ?? process.cwd();
  // Each file from the flag when given (relative to the working directory), else from the spec.
  const pick = async (flag: string, flagValue: string | undefined, specKey: "ca" | "cert" | "key"): Promise<Buffer | undefined> => {
    if (flagValue !== undefined) return readPem(flag, flagValue);
    const specValue = fromSpec?.[specKey];
    return specValue === undefined ? undefined : readPem(`controller.tls.${specKey}`, resolve(dir, specValue));
  };
  const serverName = flags.tlsServerName ?? fromSpec?.server_name;
  const tls: ClientTlsOptions = {
    ca: await pick("--tls-ca", flags.tlsCa, "ca"),
    cert: await pick("--tls-cert", flags.tlsCert, "cert"),
    key: await pick("--tls-key", flags.tlsKey, "key"),
    ...(serverName !== undefined ? { serverName } : {}),
  };
  const problem = clientTlsProblem(tls);
  if (problem !== undefined) {
    const where = anyFlag ? "--tls-ca/--tls-cert/--tls-key" : "controller.tls in the spec";
    throw new TlsOptionError(`${problem} (${where})`);
  }
  return tls;
}

/** An https certificate and key for a status server: its own flags, else the gRPC server's. */
export async function loadHttpTls(
  own: HttpTlsFlags,
  ownNames: { cert: string; key: string },
  fallback?: ServerTlsOptions,
): Promise<{ cert: Buffer; key: Buffer } | undefined> {
  if (own.cert === undefined && own.key === undefined) return fallback ? { cert: fallback.cert, key: fallback.key } : undefined;
  if (own.cert === undefined || own.key === undefined) {
    throw new TlsOptionError(
      `${own.cert === undefined ? ownNames.key : ownNames.cert} needs ${own.cert === undefined ? ownNames.cert : ownNames.key} beside it`,
    );
  }
  const tls = { cert: await readPem(ownNames.cert, own.cert), key: await readPem(ownNames.key, own.key) };
  const problem = serverTlsProblem(tls);
  if (problem !== undefined) throw new TlsOptionError(`${problem} (${ownNames.cert} ${own.cert}, ${ownNames.key} ${own.key})`);
  return tls;
}

/** True for addresses only this machine can reach (the token may then travel without TLS). */
export function isLoopbackHost(host: string): boolean {
  const bare = host.replace(/^\[|\]$/g, "").toLowerCase();
  return bare === "localhost" || bare === "::1" || /^127\.\d+\.\d+\.\d+$/.test(bare);
}

/** The warning printed when a token would cross the network in clear. */
export function clearTokenWarning(what: string, host: string, tlsFlags: string): string {
  return (
    `warning: ${what} listens on ${host} without TLS: the token (and everything else) crosses the network in clear; ` +
    `add ${tlsFlags}, or listen on 127.0.0.1`
  );
}

async function readPem(flag: string, path: string): Promise<Buffer> {
  const absolute = resolve(path);
  try {
    return await readFile(absolute);
  } catch (error) {
    const code = (error as { code?: unknown }).code;
    const why = code === "ENOENT" ? "no such file" : code === "EACCES" ? "permission denied" : code === "EISDIR" ? "it is a directory" : String(error);
    throw new TlsOptionError(`${flag}: cannot read ${absolute}: ${why}`);
  }
}

function describeFiles(flags: ServerTlsFlags): string {
  return [
    flags.tlsCert !== undefined ? `--tls-cert ${flags.tlsCert}` : "",
    flags.tlsKey !== undefined ? `--tls-key ${flags.tlsKey}` : "",
    flags.tlsClientCa !== undefined ? `--tls-client-ca ${flags.tlsClientCa}` : "",
  ]
    .filter((part) => part !== "")
    .join(", ");
}
