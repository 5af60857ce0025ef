// Runs the simulated cluster on its own: `node --import tsx examples/cluster-admission/cluster.ts
// --cores 128 --port 9750 [--name sim] [--register]`. With --register it asks the Prometheus of
// scripts/prometheus.mjs to scrape it (a file_sd target file, removed on exit).
import { parseArgs } from "node:util";
import { pathToFileURL } from "node:url";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import { SimulatedCluster } from "./simulated-cluster.ts";

const { values } = parseArgs({
  options: {
    cores: { type: "string", default: "128" },
    port: { type: "string", default: "9750" },
    name: { type: "string", default: "sim" },
    register: { type: "boolean", default: false },
  },
});
const cores = Number(values.cores);
const cluster = new SimulatedCluster({ cores, name: values.name });
const url = await cluster.start(Number(values.port));
console.log(`simulated cluster "${values.name}" with ${cores} cores on ${url} (metrics: ${url}/metrics)`);
let unregister = () => {};
if (values.register) {
  const script = join(dirname(fileURLToPath(import.meta.url)), "../../scripts/prometheus.mjs");
  const { registerScrapeTarget } = (await import(pathToFileURL(script).href)) as {
    registerScrapeTarget: (hostPort: string, labels: Record<string, string>) => { remove(): void };
  };
  const target = registerScrapeTarget(new URL(url).host, {});
  unregister = () => target.remove();
  console.log("registered with the test Prometheus (scripts/prometheus.mjs)");
}
for (const signal of ["SIGINT", "SIGTERM"] as const) {
  process.once(signal, () => {
    unregister();
    void cluster.stop().then(() => process.exit(0));
  });
}
