import { SluiceError } from "@sluice/core";
import type { DynamicSpecUpdate, QuotaServiceClient, RequestQuotaCall, ReleaseQuotaCall } from "../index.ts";

/**
 * A scripted QuotaServiceClient for unit tests of the client logic (pure: no sockets, no timers).
 * Each RequestQuota is recorded and answered by `answer`, which may throw a SluiceError.
 */
export class FakeQuotaClient implements QuotaServiceClient {
  readonly calls: RequestQuotaCall[] = [];
  readonly releases: ReleaseQuotaCall[] = [];
  answer: (call: RequestQuotaCall) => Promise<void> | void = () => {};
  /** Sent to WatchDynamicSpec subscribers as version 1; without it the watch fails. */
  dynamicSpecJson: string | null = null;

  async requestQuota(call: RequestQuotaCall) {
    this.calls.push(call);
    await this.answer(call);
    return { granted: call.amount, waitedMs: 0 };
  }

  async releaseQuota(call: ReleaseQuotaCall) {
    this.releases.push(call);
  }

  async watchDynamicSpec(_clientId: string, onUpdate: (update: DynamicSpecUpdate) => void, signal: AbortSignal): Promise<void> {
    if (this.dynamicSpecJson === null) throw new SluiceError("CONTROLLER_UNAVAILABLE", "not scripted");
    onUpdate({ version: 1, dynamicSpecJson: this.dynamicSpecJson });
    await new Promise<void>((resolve) => signal.addEventListener("abort", () => resolve(), { once: true }));
  }

  async updateDynamicSpec(): Promise<{ version: number }> {
    throw new SluiceError("CONTROLLER_UNAVAILABLE", "not scripted");
  }

  async describeThrottlers(): Promise<{ snapshotJson: string }> {
    return { snapshotJson: "{}" };
  }

  close(): void {}
}
