// services: processes
// `sluice top --metrics`: each computation's share of iteration time per part (docs/design.md §15), read
// from a running pipeline's worker metrics (`sluice run --http-port`) beside the controller's
// throttlers (`--controller-port`). Kept apart from top-cli.test.ts, which tests the frame itself.
import assert from "node:assert/strict";
import { after, before, describe, it } from "node:test";
import { type Child, sluice } from "../support/processes.ts";
import { writeTwoClassPipeline } from "../support/two-class-pipeline.ts";

const children: Child[] = [];
after(() => {
  for (const child of children) child.kill("SIGKILL");
});

const SHARES = /^(Batch|Interactive)\s+throttle (\d+)% · process (\d+)% · output (\d+)% · commit (\d+)%$/gm;

describe("sluice top --metrics", { timeout: 120_000 }, () => {
  let address = "";
  let metrics = "";
  before(async () => {
    const run = sluice(["run", writeTwoClassPipeline(), "--controller-port", "0", "--http-port", "0", "--quiet"]);
    children.push(run);
    address = (await run.waitFor(/embedded controller listening on (127\.0\.0\.1:\d+)/, 60_000))[1] ?? "";
    metrics = `http://127.0.0.1:${(await run.waitFor(/dashboard on http:\/\/127\.0\.0\.1:(\d+)\//, 60_000))[1]}/metrics`;
    // Until both computations have iterations behind them. A loaded machine starts late and may
    // answer a scrape late: a scrape that fails or times out is tried again.
    const deadline = Date.now() + 90_000;
    for (;;) {
      const text = await fetch(metrics, { signal: AbortSignal.timeout(10_000) }).then(
        (r) => r.text(),
        () => "",
      );
      const counts = ["Batch", "Interactive"].map((c) =>
        Number(new RegExp(`^sluice_worker_iteration_part_seconds_count\\{computation_id="${c}",part="Input.Throttle"\\} (\\d+)$`, "m").exec(text)?.[1] ?? 0),
      );
      if (counts.every((n) => n >= 5)) break;
      assert.ok(Date.now() < deadline, `fewer than 5 iterations of each computation after 90 s: ${counts.join(", ")}`);
      await new Promise((resolve) => setTimeout(resolve, 250));
    }
  });

  it("--once adds a line per computation: its shares of iteration time since start", async () => {
    const top = sluice(["top", "--controller", address, "--metrics", metrics, "--once"]);
    children.push(top);
    const { code } = await top.exited;
    assert.equal(code, 0, top.stderr);
    assert.match(top.stdout, /COMPUTATION\s+EPOCH PARTS \(share of iteration time, since start\)/);
    const rows = [...top.stdout.matchAll(SHARES)];
    assert.deepEqual(
      rows.map((m) => m[1]),
      ["Batch", "Interactive"],
      top.stdout,
    );
    for (const row of rows) {
      const [throttle, processing, output, commit] = row.slice(2).map(Number) as [number, number, number, number];
      assert.ok(Math.abs(throttle + processing + output + commit - 100) <= 3, `shares add up to 100 % (rounded): ${row[0]}`);
      // Both are backlogged behind a 300/s limit with a no-op process(): they mostly wait for quota.
      assert.ok(throttle >= 50, `${row[0]}\n${top.stdout}`);
    }
  });

  it("live, the shares are those of the last interval; an endpoint that does not answer is named", async () => {
    const top = sluice(["top", "--controller", address, "--metrics", metrics, "http://127.0.0.1:1/metrics", "--interval", "500ms"]);
    children.push(top);
    await top.waitFor(/last interval\)[^]*Batch\s+throttle \d+%/, 30_000);
    top.kill("SIGINT");
    assert.equal((await top.exited).code, 0, top.stderr);
    assert.match(top.stdout, /✗ http:\/\/127\.0\.0\.1:1\/metrics: /);
  });
});
