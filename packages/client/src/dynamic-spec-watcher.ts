import type { Clock } from "@sluice/core";
import type { QuotaServiceClient } from "@sluice/protocol";
import { formatIssues, validateDynamicSpec, type DynamicSpec } from "@sluice/spec";

export interface DynamicSpecWatcherOptions {
  readonly client: () => QuotaServiceClient;
  readonly clientId: string;
  readonly clock: Clock;
  /** Called with each new version, in order. */
  readonly onSpec: (spec: DynamicSpec, version: number) => void;
  readonly log?: (line: string) => void;
  /** Pause before reconnecting after the stream broke; doubles up to 5 s. */
  readonly reconnectDelayMs?: number;
}

/**
 * Keeps a worker's view of dynamic_spec current: subscribes to WatchDynamicSpec, and reconnects with
 * backoff whenever the controller goes away (a restarted controller sends its current version first).
 */
export class DynamicSpecWatcher {
  private readonly stop = new AbortController();
  private version = 0;
  private json = "";
  private readonly firstSpec: Promise<void>;
  private resolveFirst: () => void = () => {};
  private running: Promise<void> | null = null;

  constructor(private readonly options: DynamicSpecWatcherOptions) {
    this.firstSpec = new Promise((resolve) => (this.resolveFirst = resolve));
  }

  /** Starts watching; resolves once the first dynamic_spec has arrived. Idempotent. */
  start(): Promise<void> {
    this.running ??= this.run();
    return this.firstSpec;
  }

  get currentVersion(): number {
    return this.version;
  }

  async close(): Promise<void> {
    this.stop.abort();
    await this.running;
  }

  private async run(): Promise<void> {
    const { clock, log } = this.options;
    const initialDelay = this.options.reconnectDelayMs ?? 250;
    let delay = initialDelay;
    while (!this.stop.signal.aborted) {
      try {
        await this.options.client().watchDynamicSpec(
          this.options.clientId,
          (update) => {
            delay = initialDelay;
            this.apply(update.version, update.dynamicSpecJson);
          },
          this.stop.signal,
        );
      } catch (error) {
        if (this.stop.signal.aborted) break;
        log?.(`dynamic_spec watch interrupted (${error instanceof Error ? error.message : String(error)}); reconnecting in ${delay} ms`);
      }
      if (this.stop.signal.aborted) break;
      await clock.sleep(delay, this.stop.signal).catch(() => undefined);
      delay = Math.min(5000, delay * 2);
    }
  }

  private apply(version: number, json: string): void {
    // A restarted controller numbers its versions from 1 again: the same number with other content
    // is a new dynamic_spec too.
    if (version === this.version && json === this.json) return;
    let parsed: unknown;
    try {
      parsed = JSON.parse(json);
    } catch (error) {
      this.options.log?.(`ignoring dynamic_spec version ${version}: not JSON (${String(error)})`);
      return;
    }
    const result = validateDynamicSpec(parsed, { pathPrefix: "dynamic_spec" });
    if (!result.ok) {
      // The controller validated it already; a worker of another Sluice version may disagree.
      this.options.log?.(`ignoring dynamic_spec version ${version}: ${formatIssues(result.issues)}`);
      return;
    }
    this.version = version;
    this.json = json;
    this.options.onSpec(result.value, version);
    this.resolveFirst();
  }
}
