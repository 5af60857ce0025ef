// One client process using many keys of one keyed throttler (docs/design.md §11.4), as a worker whose
// jobs call forKey(customer) would: connectThrottlers over the QuotaStream transport to a controller
// process, a caller per key looping throttle(1). A gRPC interceptor counts the QuotaStream messages
// this process sends (frames) and the RequestQuota and ReleaseQuota calls they carry, inside the
// measured window. Events: ready {pid} (connected); then, given run {windowFrom, windowTo, stopAt},
// result {frames, requestQuotaCalls, releaseQuotaCalls, grants}.
import { InterceptingCall, type Interceptor } from "@grpc/grpc-js";
import { connectThrottlers } from "@sluice/client";
import { createStreamQuotaClient } from "@sluice/protocol";
import { configArgument, emit, onCommands } from "../lib/child-io.ts";

interface Config {
  readonly address: string;
  readonly throttlerId: string;
  readonly keys: number;
}

/** Sent once the client is connected and ready: epoch ms at which the window opens and closes; the callers stop at `stopAt`. */
interface Run {
  readonly windowFrom: number;
  readonly windowTo: number;
  readonly stopAt: number;
}

/** What the interceptor reads of a QuotaStream message (quota.proto's QuotaStreamClientFrame). */
interface StreamFrame {
  readonly calls: readonly { readonly requestQuota?: unknown; readonly releaseQuota?: unknown }[];
}

const config = configArgument<Config>();
const epochNow = (): number => performance.timeOrigin + performance.now();
const counted = { frames: 0, requestQuotaCalls: 0, releaseQuotaCalls: 0, grants: 0 };
let run: Run = { windowFrom: Number.POSITIVE_INFINITY, windowTo: Number.POSITIVE_INFINITY, stopAt: Number.POSITIVE_INFINITY };
const inWindow = () => {
  const now = epochNow();
  return now >= run.windowFrom && now < run.windowTo;
};

const countFrames: Interceptor = (options, nextCall) =>
  new InterceptingCall(nextCall(options), {
    sendMessage(message: StreamFrame, next) {
      if (options.method_definition.path.endsWith("/QuotaStream") && inWindow()) {
        counted.frames += 1;
        for (const call of message.calls) {
          if (call.requestQuota) counted.requestQuotaCalls += 1;
          if (call.releaseQuota) counted.releaseQuotaCalls += 1;
        }
      }
      next(message);
    },
  });

const throttlers = await connectThrottlers({
  controller: config.address,
  clientId: `bench-keys-${process.pid}`,
  log: null,
  connect: (address, options) => createStreamQuotaClient(address, { ...options, channelOptions: { ...options.channelOptions, interceptors: [countFrames] } }),
});
const started = new Promise<void>((resolve) =>
  onCommands((command) => {
    if (command.type !== "run") return;
    run = command["run"] as Run;
    resolve();
  }),
);
emit({ type: "ready", pid: process.pid });
await started;
const handle = throttlers.getThrottlerOrThrow(config.throttlerId);
await Promise.all(
  Array.from({ length: config.keys }, async (_, i) => {
    const key = handle.forKey(`customer-${i}`);
    while (epochNow() < run.stopAt) {
      await key.throttle(1);
      if (inWindow()) counted.grants += 1;
    }
  }),
);
emit({ type: "result", ...counted });
await throttlers.close();
process.exit(0);
