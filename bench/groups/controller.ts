import type { BenchGroup } from "../lib/group.ts";
import { measureControllerThroughput } from "./controller-throughput.ts";
import { measureSchedulerCost } from "./scheduler-cost.ts";

export const controller: BenchGroup = {
  id: "controller",
  title: "2. Controller: RequestQuota over loopback gRPC, and the scheduler's cost per grant",
  async run(g) {
    await measureControllerThroughput(g);
    await measureSchedulerCost(g);
  },
};
