// Toxiproxy over its HTTP API (tools/toxiproxy/README.md), and typed access to scripts/toxiproxy.mjs,
// which builds and starts the server (plain ESM, no declarations of its own).
import { join } from "node:path";
import { pathToFileURL } from "node:url";
import { ROOT } from "../support/processes.ts";

interface ToxiproxyScript {
  ensureToxiproxy(): Promise<{ apiUrl: string; stop(): Promise<void> }>;
}

export async function ensureToxiproxy(): Promise<{ apiUrl: string; stop(): Promise<void> }> {
  const script = (await import(pathToFileURL(join(ROOT, "scripts/toxiproxy.mjs")).href)) as ToxiproxyScript;
  return script.ensureToxiproxy();
}

export class ToxiproxyApi {
  constructor(readonly apiUrl: string) {}

  /** A proxy `name` listening on 127.0.0.1:listenPort, forwarding to 127.0.0.1:upstreamPort (replaces one of that name). */
  async create(name: string, listenPort: number, upstreamPort: number): Promise<void> {
    await this.remove(name);
    await this.call("POST", "/proxies", { name, listen: `127.0.0.1:${listenPort}`, upstream: `127.0.0.1:${upstreamPort}`, enabled: true });
  }

  /** Disabled: its open connections are closed and new ones refused (a real TCP cut). */
  async setEnabled(name: string, enabled: boolean): Promise<void> {
    await this.call("POST", `/proxies/${encodeURIComponent(name)}`, { enabled });
  }

  async remove(name: string): Promise<void> {
    await this.call("DELETE", `/proxies/${encodeURIComponent(name)}`, undefined, [404]);
  }

  private async call(method: string, path: string, body: unknown, alsoFine: readonly number[] = []): Promise<void> {
    const response = await fetch(`${this.apiUrl}${path}`, {
      method,
      ...(body === undefined ? {} : { body: JSON.stringify(body), headers: { "content-type": "application/json" } }),
      signal: AbortSignal.timeout(5_000),
    });
    const text = await response.text();
    if (!response.ok && !alsoFine.includes(response.status)) {
      throw new Error(`Toxiproxy ${method} ${this.apiUrl}${path} answered ${response.status}: ${text.trim()}`);
    }
  }
}
