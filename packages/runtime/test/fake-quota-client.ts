import { SluiceError } from "@sluice/core";
import type { QuotaServiceClient, RequestQuotaCall, ReleaseQuotaCall } from "@sluice/protocol";

/**
 * A scripted QuotaServiceClient for unit tests of the client logic (pure: no sockets, no timers).
 * Each RequestQuota is recorded and answered by `answer`, which may throw a SluiceError.
 */
export class FakeQuotaClient implements QuotaServiceClient {
  readonly calls: RequestQuotaCall[] = [];
  readonly releases: ReleaseQuotaCall[] = [];
  answer: (call: RequestQuotaCall) => Promise<void> | void = () => {};

  async requestQuota(call: RequestQuotaCall) {
    this.calls.push(call);
    await this.answer(call);
    return { granted: call.amount, waitedMs: 0 };
  }

  async releaseQuota(call: ReleaseQuotaCall) {
    this.releases.push(call);
  }

  async watchDynamicSpec(): Promise<void> {
    throw new SluiceError("CONTROLLER_UNAVAILABLE", "not scripted");
  }

  async updateDynamicSpec(): Promise<{ version: number }> {
    throw new SluiceError("CONTROLLER_UNAVAILABLE", "not scripted");
  }

  async describeThrottlers(): Promise<{ snapshotJson: string }> {
    return { snapshotJson: "{}" };
  }

  close(): void {}
}
