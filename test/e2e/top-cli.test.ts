// services: processes
// `sluice top` against a running pipeline (`sluice run --controller-port`): one frame with --once,
// live frames until Ctrl-C, in-place redraws in a real terminal (a pty from util-linux `script`), and
// a clear error for an address nobody serves. Every process is started here and ended by its own pid.
import assert from "node:assert/strict";
import { spawn } from "node:child_process";
import { existsSync } from "node:fs";
import { after, before, describe, it } from "node:test";
import { createGrpcQuotaClient } from "@sluice/protocol";
import { BUILT_PACKAGES_FLAGS, Child, ROOT, SLUICE_BIN, sluice } from "../support/processes.ts";
import { writeTwoClassPipeline } from "../support/two-class-pipeline.ts";

const children: Child[] = [];
after(() => {
  for (const child of children) child.kill("SIGKILL");
});

function track(child: Child): Child {
  children.push(child);
  return child;
}

/** Resolves once the controller has granted anything on `throttlerId` (polls its own counters). */
async function firstGrant(address: string, throttlerId: string, timeoutMs = 60_000): Promise<void> {
  const client = createGrpcQuotaClient(address);
  try {
    const end = performance.now() + timeoutMs;
    for (;;) {
      const snapshot = JSON.parse((await client.describeThrottlers()).snapshotJson) as { throttlers: { id: string; counters: { granted: number } }[] };
      if ((snapshot.throttlers.find((t) => t.id === throttlerId)?.counters.granted ?? 0) > 0) return;
      assert.ok(performance.now() < end, `no grant on ${throttlerId} within ${timeoutMs} ms`);
      await new Promise((resolve) => setTimeout(resolve, 100));
    }
  } finally {
    client.close();
  }
}

describe("sluice top", { timeout: 300_000 }, () => {
  let address = "";
  before(async () => {
    const run = track(sluice(["run", writeTwoClassPipeline(), "--controller-port", "0", "--quiet"]));
    address = (await run.waitFor(/embedded controller listening on (127\.0\.0\.1:\d+)/))[1] ?? "";
    // The bucket starts full, so its first second hands out a whole bucket (300) on top of the rate.
    // The controller's granted rate is taken over the last 5 s (plus up to one 250 ms slot): top is
    // asked only once that window has moved past the first grant, whenever a loaded machine let the
    // jobs make it. From then on any window holds at most rate × window + one bucket (the jobs may
    // stall and let it refill): (300 × 5 + 300) / 5 = 360/s.
    await firstGrant(address, "api_quota");
    await new Promise((resolve) => setTimeout(resolve, 6_000));
  });

  it("--once prints one frame: limits, rates, queues, waits and class shares", async () => {
    const top = track(sluice(["top", "--controller", address, "--once"]));
    const { code } = await top.exited;
    assert.equal(code, 0, top.stderr);
    const lines = top.stdout.trimEnd().split("\n");
    assert.match(lines[0] ?? "", new RegExp(`^sluice top · controller ${address.replace(/\./g, "\\.")} · dynamic_spec v1 · \\d\\d:\\d\\d:\\d\\d UTC`));
    assert.doesNotMatch(top.stdout, /\x1b\[/, "no terminal control codes when stdout is not a terminal");
    const api = lines.find((line) => line.startsWith("api_quota"));
    assert.ok(api, top.stdout);
    const [, limit, granted] = api.trim().split(/\s{2,}/);
    assert.equal(limit, "300");
    // At most 360/s once the start burst is out of the window (see before()); 400 leaves room for the
    // window's slot rounding. At least half the limit: the jobs are backlogged the whole time.
    assert.ok(Number(granted) >= 150 && Number(granted) <= 400, `granted ${granted}/s near the limit of 300/s`);
    assert.match(lines.find((line) => line.startsWith("bytes_quota")) ?? "", /^bytes_quota\s+20\.0k\s/);
    const share = (id: string) => {
      const match = new RegExp(`^\\s+${id}\\s.*\\s(\\d+)% → (\\d+)%`).exec(lines.find((line) => line.trimStart().startsWith(`${id} `)) ?? "");
      assert.ok(match, `${id} row in\n${top.stdout}`);
      return { byWeight: Number(match[1]), observed: Number(match[2]) };
    };
    assert.equal(share("interactive").byWeight, 75);
    assert.equal(share("batch").byWeight, 25);
    assert.ok(Math.abs(share("interactive").observed - 75) <= 15, `interactive observed ${share("interactive").observed} %`);
  });

  it("without --once it refreshes every --interval until Ctrl-C", async () => {
    const top = track(sluice(["top", "--controller", address, "--interval", "300ms"]));
    await top.waitFor(/(sluice top ·[^]*){3}/);
    top.kill("SIGINT");
    assert.equal((await top.exited).code, 0, top.stderr);
    assert.match(top.stdout, /avg and p95 over the last 300ms/, "later frames measure waits over the interval");
  });

  it("redraws in place in a terminal and restores the screen on Ctrl-C", {
    skip: existsSync("/usr/bin/script") ? false : "util-linux script not found",
  }, async () => {
    // `script` gives the command a pseudo-terminal and copies what it draws to our pipe. It starts the
    // command through $SHELL -c; `exec` makes sluice the terminal's foreground process itself, since a
    // shell left in between (dash) would die of the same Ctrl-C with 130 whatever sluice does.
    const command = `exec ${[process.execPath, ...BUILT_PACKAGES_FLAGS, SLUICE_BIN].map((arg) => JSON.stringify(arg)).join(" ")} top --controller ${address} --interval 300ms`;
    const tty = track(
      new Child(
        spawn("script", ["-qfec", command, "/dev/null"], {
          cwd: ROOT,
          env: { ...process.env, SHELL: "/bin/sh", COLUMNS: "120", TERM: "xterm" },
          stdio: ["pipe", "pipe", "pipe"],
        }),
      ),
    );
    await tty.waitFor(/(\x1b\[H[^]*api_quota[^]*){2}/);
    tty.process.stdin?.write("\x03"); // Ctrl-C through the terminal, as a person presses it
    // unref: a timer left pending would keep this file's process alive for the rest of its 30 s.
    const { code } = await Promise.race([tty.exited, new Promise<{ code: null }>((resolve) => setTimeout(() => resolve({ code: null }), 30_000).unref())]);
    assert.equal(code, 0, `exit ${code}; output:\n${JSON.stringify(tty.stdout.slice(-500))}`);
    assert.ok(tty.stdout.includes("\x1b[?1049h"), "enters the alternate screen");
    assert.ok(tty.stdout.includes("\x1b[?1049l"), "leaves it on exit, so the user's scrollback is back");
    assert.match(tty.stdout, /\x1b\[1msluice top\x1b\[22m/, "bold title in a terminal");
  });

  it("fails with the address when nobody serves it", async () => {
    const top = track(sluice(["top", "--controller", "127.0.0.1:1", "--once"]));
    assert.equal((await top.exited).code, 1);
    assert.match(top.stderr, /^sluice top: .*127\.0\.0\.1:1.*is `sluice controller` \(or `sluice run --controller-port`\) serving 127\.0\.0\.1:1\?/);
  });
});
