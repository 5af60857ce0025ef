// slow: started first on a fresh clone (scripts/run-test-files.mjs)
import { createGrpcQuotaClient, createInMemoryQuotaClient, createStreamQuotaClient, serveQuotaService } from "@sluice/protocol";
import { quotaServiceContract } from "./quota-service-contract.ts";

quotaServiceContract("in-memory transport", async (controller) => {
  const client = createInMemoryQuotaClient(controller);
  return { client, close: async () => client.close() };
});

quotaServiceContract("gRPC on 127.0.0.1", async (controller) => {
  const server = await serveQuotaService(controller, { port: 0 });
  const client = createGrpcQuotaClient(server.address);
  return {
    client,
    close: async () => {
      client.close();
      await server.close({ graceMs: 200 });
    },
  };
});

quotaServiceContract("QuotaStream on 127.0.0.1", async (controller) => {
  const server = await serveQuotaService(controller, { port: 0 });
  const client = createStreamQuotaClient(server.address);
  return {
    client,
    close: async () => {
      client.close();
      await server.close({ graceMs: 200 });
    },
  };
});
