// A stand-in for a slow external service (a CRM, a geo-IP lookup) that a real enricher would call
// over HTTP: 20–60 ms per call, and it answers for any customer id. Its provider allows 100 calls per
// second across all of our workers — which is what the `external_api_quota` throttler enforces.

export interface CustomerProfile {
  readonly customerId: string;
  readonly tier: "free" | "pro" | "enterprise";
  readonly country: string;
}

const TIERS = ["free", "pro", "enterprise"] as const;
const COUNTRIES = ["DE", "FR", "NL", "PL", "PT", "SE", "US", "BR", "JP", "IN"] as const;

export async function lookUpCustomer(customerId: string, signal?: AbortSignal): Promise<CustomerProfile> {
  const hash = [...customerId].reduce((h, c) => (h * 31 + c.charCodeAt(0)) >>> 0, 7);
  await new Promise<void>((resolve, reject) => {
    const timer = setTimeout(resolve, 20 + (hash % 41));
    signal?.addEventListener(
      "abort",
      () => {
        clearTimeout(timer);
        reject(signal.reason);
      },
      { once: true },
    );
  });
  return { customerId, tier: TIERS[hash % TIERS.length] ?? "free", country: COUNTRIES[hash % COUNTRIES.length] ?? "DE" };
}
