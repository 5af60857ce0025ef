import { asSluiceError, SluiceError } from "@sluice/core";
import type { QuotaServiceClient } from "@sluice/protocol";

/**
 * The controller as a standalone client sees it: one QuotaServiceClient per address, the one in use
 * looked up per RPC (the retrying remote and the dynamic_spec watcher call `current()` each attempt).
 *
 * With several addresses (docs/design.md §5.2: a leader and its followers), a call that finds its controller
 * unreachable — or a follower answering UNAVAILABLE — moves later calls to the next address, so the
 * client settles on whichever one serves; the retries themselves stay the retrying remote's.
 *
 * It also remembers what close() must wait for: the ReleaseQuota calls that return a closing pool,
 * which would be cut off if the channels closed under them.
 */
export class ControllerConnection {
  private readonly clients: readonly QuotaServiceClient[];
  private readonly wrapped: readonly QuotaServiceClient[];
  private index = 0;
  private readonly releases = new Set<Promise<void>>();
  private watchFailure: SluiceError | null = null;
  private readonly watchFailureListeners = new Set<(error: SluiceError) => void>();

  constructor(
    readonly addresses: readonly string[],
    connect: (address: string) => QuotaServiceClient,
  ) {
    this.clients = addresses.map((address) => connect(address));
    this.wrapped = this.clients.map((client, i) => this.wrap(client, i));
  }

  /** The connection calls go to now. */
  current(): QuotaServiceClient {
    const client = this.wrapped[this.index];
    if (!client) throw new Error("ControllerConnection needs at least one address");
    return client;
  }

  get currentAddress(): string {
    return this.addresses[this.index] ?? "";
  }

  /** The latest error the dynamic_spec watch ended with (null while it runs or before it failed). */
  get lastWatchFailure(): SluiceError | null {
    return this.watchFailure;
  }

  onWatchFailure(listener: (error: SluiceError) => void): () => void {
    this.watchFailureListeners.add(listener);
    return () => this.watchFailureListeners.delete(listener);
  }

  /** Waits (at most `timeoutMs`) for pools being returned, then closes every channel. */
  async close(timeoutMs: number): Promise<void> {
    if (this.releases.size > 0) {
      let timer: NodeJS.Timeout | undefined;
      const timeout = new Promise<void>((resolve) => (timer = setTimeout(resolve, timeoutMs)));
      await Promise.race([Promise.allSettled([...this.releases]), timeout]);
      clearTimeout(timer);
    }
    for (const client of this.clients) client.close();
  }

  private failedOver(i: number, error: unknown): void {
    const code = asSluiceError(error, (message) => new SluiceError("CONTROLLER_UNAVAILABLE", message)).code;
    // Only "this controller does not serve": other refusals (QUEUE_FULL, UNAUTHENTICATED, …) would
    // be the same at any address.
    if (code !== "CONTROLLER_UNAVAILABLE" || this.clients.length < 2 || this.index !== i) return;
    this.index = (i + 1) % this.clients.length;
  }

  private wrap(client: QuotaServiceClient, i: number): QuotaServiceClient {
    const watch = (error: unknown) => {
      this.failedOver(i, error);
      throw error;
    };
    const renew = client.renewLeases?.bind(client);
    return {
      requestQuota: (call, options) => client.requestQuota(call, options).catch(watch),
      releaseQuota: (call, options) => {
        const pending = client.releaseQuota(call, options).catch(watch);
        const tracked = pending.then(
          () => undefined,
          () => undefined,
        );
        this.releases.add(tracked);
        void tracked.then(() => this.releases.delete(tracked));
        return pending;
      },
      ...(renew ? { renewLeases: (call, options) => renew(call, options).catch(watch) } : {}),
      updateDynamicSpec: (json, options) => client.updateDynamicSpec(json, options).catch(watch),
      describeThrottlers: (options, filter) => client.describeThrottlers(options, filter).catch(watch),
      ...(client.reportWatermarks ? { reportWatermarks: (call, options) => client.reportWatermarks!(call, options).catch(watch) } : {}),
      watchDynamicSpec: (clientId, onUpdate, signal) =>
        client.watchDynamicSpec(clientId, onUpdate, signal).then(
          () => undefined,
          (error: unknown) => {
            const failure = asSluiceError(error, (message) => new SluiceError("CONTROLLER_UNAVAILABLE", message));
            this.watchFailure = failure;
            for (const listener of this.watchFailureListeners) listener(failure);
            return watch(error);
          },
        ),
      close: () => client.close(),
    };
  }
}
