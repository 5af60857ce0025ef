export { FakeQuotaClient } from "./fake-quota-client.ts";
