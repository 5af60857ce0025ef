import { defineComputation } from "@sluice/runtime";
import type { ClusterTask } from "./tasks.ts";

// Submits each task to the cluster and waits until it is done. The concurrency throttler
// `cluster_tasks` (pipeline.json) is applied automatically: with max_rows_per_batch 1, each task
// holds one unit from before it is submitted until it is done, so the throttler's limit is the
// number of tasks running on the cluster — and the adaptive loop moves that limit to hold the
// cluster's CPU inside 90–95 %.

const clusterUrl = process.env["CLUSTER_URL"] ?? "http://127.0.0.1:9750";

export default defineComputation<ClusterTask>({
  async process(batch) {
    await Promise.all(
      batch.messages.map(async (message) => {
        const response = await fetch(`${clusterUrl}/tasks`, {
          method: "POST",
          headers: { "content-type": "application/json" },
          body: JSON.stringify(message.value),
        });
        if (!response.ok) throw new Error(`cluster at ${clusterUrl} refused task ${message.key}: HTTP ${response.status} ${await response.text()}`);
        await response.arrayBuffer();
      }),
    );
  },
});
