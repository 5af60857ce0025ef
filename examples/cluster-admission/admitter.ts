import { defineComputation } from "@sluice/runtime";
import type { ClusterTask } from "./tasks.ts";

// Submits each task to the cluster and waits until it is done. Each task first takes as many units
// of the concurrency throttler `cluster_tasks` (pipeline.json) as it asks cores, and gives them back
// when it is done: the throttler's limit is the number of cores the admitted tasks may ask for at
// once, and the adaptive loop moves it to hold the cluster's CPU inside 90–95 %.
//
// Cores, not tasks: the CPU the loop reads is the sum of the running tasks' cores, so a limit on
// the number of tasks leaves the load to the task mix (16 one-core tasks and 16 three-core tasks
// are a 3× different load) — measured, a perfectly chosen fixed number of tasks reads inside the
// band only ~58 % of the time (docs/internals/adaptive-law.md). A task's cores are known when it is
// submitted (ClickHouse's max_threads); its duration is not, and varies 10×.

const clusterUrl = process.env["CLUSTER_URL"] ?? "http://127.0.0.1:9750";

export default defineComputation<ClusterTask>({
  async process(batch, ctx) {
    const cores = ctx.getThrottlerOrThrow("cluster_tasks");
    await Promise.all(
      batch.messages.map(async (message) => {
        const task = message.value;
        await cores.throttle(task.cores, { signal: ctx.signal });
        try {
          const response = await fetch(`${clusterUrl}/tasks`, {
            method: "POST",
            headers: { "content-type": "application/json" },
            body: JSON.stringify(task),
            signal: ctx.signal,
          });
          if (!response.ok) throw new Error(`cluster at ${clusterUrl} refused task ${message.key}: HTTP ${response.status} ${await response.text()}`);
          await response.arrayBuffer();
        } finally {
          cores.release(task.cores);
        }
      }),
    );
  },
});
