// A quota server in its own process, so that the load and the server never share an event loop:
//   mode "sluice": the real controller (startController) on a pipeline spec;
//   mode "grpc-echo": bare grpc-js serving the same proto, answering every RequestQuota at once —
//   the transport's floor, against which the controller's own cost shows as a ratio;
//   mode "grpc-hold": bare grpc-js that holds every RequestQuota until told to answer — the
//   transport's own cost of a waiting call.
//   Modes "grpc-echo" also serves QuotaStream bare: every request_quota call of a frame answered at
//   once, all in one frame (the stream transport's floor).
// Events: ready {address, pid}; usage {cpuMs, rssBytes, heapUsedBytes, at} on request (after a
// full GC when asked and the process runs with --expose-gc); describe {snapshotJson} and update
// {version} (sluice mode); timing-reset and timing {count, handlerP50Ms, handlerP99Ms,
// loopDelayP99Ms} (sluice mode with timing: the controller's own share of each RequestQuota); held {count} and release {count} (grpc-hold mode).
import { Server, ServerCredentials, type sendUnaryData, type ServerDuplexStream, type ServerUnaryCall } from "@grpc/grpc-js";
import { startController, type RunningController } from "@sluice/controller";
import { quotaServiceDefinition } from "@sluice/protocol";
import { validatePipelineSpec } from "@sluice/spec";
import { configArgument, emit, onCommands, resourceUsage } from "../lib/child-io.ts";
import { ControllerTiming } from "../lib/controller-timing.ts";

interface Config {
  readonly mode: "sluice" | "grpc-echo" | "grpc-hold";
  /** A pipeline spec (as a user writes it) for mode "sluice". */
  readonly spec?: unknown;
  /** Mode "sluice": time each RequestQuota inside the controller (commands timing-reset, timing). */
  readonly timing?: boolean;
}

interface WireRequest {
  amount: number;
}

interface WireStreamFrame {
  calls: { callId: number; requestQuota?: WireRequest }[];
}

const config = configArgument<Config>();
let running: RunningController | null = null;
let echo: Server | null = null;
let timing: ControllerTiming | null = null;
const held: (() => void)[] = [];

if (config.mode === "sluice") {
  const parsed = validatePipelineSpec(config.spec);
  if (!parsed.ok) throw new Error(`controller spec invalid: ${JSON.stringify(parsed.issues)}`);
  running = await startController({ spec: parsed.value, port: 0 });
  if (config.timing) timing = new ControllerTiming(running.controller);
  emit({ type: "ready", address: running.address, pid: process.pid });
} else {
  const server = new Server();
  const definition = quotaServiceDefinition();
  server.addService(definition, {
    RequestQuota: (call: ServerUnaryCall<WireRequest, unknown>, callback: sendUnaryData<unknown>) => {
      const answer = () => callback(null, { granted: call.request.amount, waitedMs: 0 });
      if (config.mode === "grpc-hold") held.push(answer);
      else answer();
    },
    QuotaStream: (call: ServerDuplexStream<WireStreamFrame, unknown>) => {
      call.on("data", (frame: WireStreamFrame) => {
        const answers = frame.calls.flatMap((c) =>
          c.requestQuota ? [{ callId: c.callId, requestQuota: { granted: c.requestQuota.amount, waitedMs: 0 } }] : [],
        );
        if (answers.length > 0) call.write({ answers });
      });
      call.on("end", () => call.end());
      call.on("error", () => undefined);
    },
  });
  const port = await new Promise<number>((resolve, reject) =>
    server.bindAsync("127.0.0.1:0", ServerCredentials.createInsecure(), (error, bound) => (error ? reject(error) : resolve(bound))),
  );
  echo = server;
  emit({ type: "ready", address: `127.0.0.1:${port}`, pid: process.pid });
}

onCommands(async (command) => {
  if (command.type === "usage") {
    const gc = (globalThis as { gc?: () => void }).gc;
    if (command["collect"] === true && gc) gc();
    emit({ type: "usage", ...resourceUsage() });
  } else if (command.type === "timing-reset") {
    timing?.reset();
    emit({ type: "timing-reset" });
  } else if (command.type === "timing") {
    emit({ type: "timing", ...(timing?.read() ?? {}) });
  } else if (command.type === "describe" && running) {
    const { snapshotJson } = await running.controller.describeThrottlers();
    emit({ type: "describe", snapshotJson });
  } else if (command.type === "heap-snapshot") {
    // For finding what a waiting request keeps alive (bench/README.md, group 6): v8's own format.
    const { writeHeapSnapshot } = await import("node:v8");
    emit({ type: "heap-snapshot", path: writeHeapSnapshot(String(command["path"])) });
  } else if (command.type === "held") {
    emit({ type: "held", count: held.length });
  } else if (command.type === "release") {
    const answers = held.splice(0);
    for (const answer of answers) answer();
    emit({ type: "release", count: answers.length });
  } else if (command.type === "update" && running) {
    const { version } = await running.controller.updateDynamicSpec(String(command["dynamicSpecJson"]));
    emit({ type: "update", version });
  }
});

const stop = async () => {
  await running?.close();
  echo?.forceShutdown();
  process.exit(0);
};
process.once("SIGTERM", () => void stop());
process.once("SIGINT", () => void stop());
