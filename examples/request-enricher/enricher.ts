import { defineComputation } from "@sluice/runtime";
import { lookUpCustomer } from "./fake-api.ts";

interface Request {
  readonly requestId: string;
  readonly customerId: string;
  readonly path: string;
  readonly at: number;
}

// Enriches each request with the customer's profile from a slow external API. The API allows 100
// calls per second in total, however many workers and partitions run this: every call first takes
// one unit of the distributed throttler `external_api_quota` (100/s on the controller). The calls of
// a batch run concurrently — the quota, not the API's latency, sets the pace — and the results are
// emitted in input order.
export default defineComputation<Request>({
  async process(batch, ctx) {
    const api = ctx.getThrottlerOrThrow("external_api_quota");
    const profiles = await Promise.all(
      batch.messages.map(async (message) => {
        await api.throttle(1, { signal: ctx.signal });
        return lookUpCustomer(message.value.customerId, ctx.signal);
      }),
    );
    batch.messages.forEach((message, i) => {
      ctx.emit("enriched", { key: message.key, value: { ...message.value, customer: profiles[i], enrichedAt: Date.now() } });
    });
  },
});
