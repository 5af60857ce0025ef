// A worker's quota traffic as it reaches the controller when the worker uses many keys: ONE
// QuotaStream per worker process (docs/design.md §11.4: the refills of every key of a client travel
// together on the worker's stream), each frame carrying a batch of RequestQuota calls for different
// keys, encoded by the protocol's own QuotaStream serializer (what createStreamQuotaClient writes).
// Each call is what the client's refill sends: the worker's client id, a fresh UUID request id, the
// call's deadline (rpc_timeout) as timeout_ms, its key. The loop is closed per frame: a new frame goes
// out whenever a frame's worth of calls has been answered, so at most `framesInFlight` frames of
// calls are open on the stream. Its window is read at each frame from `bounds`, fixed for a full
// run, moved by the parent's `window` commands in a gated (quick) run (bench/lib/load-window.ts). It does no per-call promise or session work, so one generator
// process can keep a controller busier than 16-caller streams of awaited calls can.
import { randomUUID } from "node:crypto";
import { Client, credentials, Metadata } from "@grpc/grpc-js";
import { QUOTA_CLIENT_CHANNEL_OPTIONS, quotaServiceDefinition } from "@sluice/protocol";
import { before, type WindowBounds } from "./load-window.ts";

export interface FrameLoadPlan {
  readonly address: string;
  readonly throttlerId: string;
  /** Each call names one of this many keys (`key-<n>`), the calls going round them all; 0 = unkeyed. */
  readonly keys: number;
  /** This worker's client id (every call of a worker carries the same one). */
  readonly clientId: string;
  readonly callsPerFrame: number;
  readonly framesInFlight: number;
  /** The calls' deadline, as the client's rpc_timeout sets it. */
  readonly timeoutMs: number;
  /** Epoch ms: load starts. */
  readonly startAt: number;
  /** The window and the stop as they stand now (read at each frame sent or answered). */
  readonly bounds: () => WindowBounds;
  /**
   * A gated run: the window's end may be learnt after calls past it were counted, so each counted
   * call's and frame's time is kept, and those at or past the end are dropped once the load stopped.
   */
  readonly gated: boolean;
  /** Called at each answer frame with a call answered (a gated run's `loaded` event comes from the first). */
  readonly onAnswered?: () => void;
  /** Called at each answer frame in the window once a call was counted (a gated run's `counted` comes from the first). */
  readonly onCounted?: () => void;
  /** Which key this worker starts at, so that two workers do not move in step. */
  readonly keyOffset: number;
}

export interface FrameLoadOutcome {
  calls: number;
  latenciesMs: number[];
  lagsMs: number[];
  errors: number;
  firstError: string | null;
  /** Frames sent and answer frames received inside the window. */
  framesSent: number;
  answerFrames: number;
}

interface WireAnswer {
  readonly callId: number;
  readonly error?: { readonly message?: string; readonly sluiceErrorCode?: string } | null;
}

const epochNow = (): number => performance.timeOrigin + performance.now();
const NO_METADATA: Record<string, string> = Object.freeze({}) as Record<string, string>;

export async function frameLoop(plan: FrameLoadPlan): Promise<FrameLoadOutcome> {
  const outcome: FrameLoadOutcome = { calls: 0, latenciesMs: [], lagsMs: [], errors: 0, firstError: null, framesSent: 0, answerFrames: 0 };
  const method = quotaServiceDefinition().QuotaStream;
  const client = new Client(plan.address, credentials.createInsecure(), { ...QUOTA_CLIENT_CHANNEL_OPTIONS });
  const stream = client.makeBidiStreamRequest(method.path, method.requestSerialize, method.responseDeserialize, new Metadata());
  const names = Array.from({ length: Math.max(1, plan.keys) }, (_, i) => `key-${i}`);
  // Send time of each open call, by call id modulo a ring larger than the calls open at once.
  const ring = 1 << Math.ceil(Math.log2(plan.callsPerFrame * plan.framesInFlight * 2));
  const sentAt = new Float64Array(ring);
  let nextCallId = 1;
  let nextKey = plan.keyOffset;
  let open = 0;
  let stopping = false;
  /** A gated run: when each counted call was answered, each counted frame sent and answered. */
  const countedAt: number[] = [];
  const sentFramesAt: number[] = [];
  const answerFramesAt: number[] = [];

  const sendFrame = (): void => {
    const now = epochNow();
    const calls = new Array(plan.callsPerFrame);
    for (let i = 0; i < plan.callsPerFrame; i++) {
      const callId = nextCallId++;
      sentAt[callId & (ring - 1)] = now;
      const key = plan.keys > 0 ? { key: names[nextKey++ % plan.keys] } : {};
      calls[i] = {
        callId,
        timeoutMs: plan.timeoutMs,
        metadata: NO_METADATA,
        requestQuota: { throttlerId: plan.throttlerId, clientId: plan.clientId, amount: 1, timestampMs: 0, quotaClassId: "", requestId: randomUUID(), ...key },
      };
    }
    open += plan.callsPerFrame;
    const { windowFrom, windowTo } = plan.bounds();
    if (now >= windowFrom && now < windowTo) {
      outcome.framesSent++;
      if (plan.gated) sentFramesAt.push(now);
    }
    stream.write({ calls });
  };

  const done = new Promise<void>((resolve) => {
    const finish = (): void => {
      stopping = true;
      resolve();
    };
    stream.on("data", (frame: { answers: WireAnswer[] }) => {
      const now = epochNow();
      const { windowFrom, windowTo, stopAt } = plan.bounds();
      const inWindow = now >= windowFrom && now < windowTo;
      if (inWindow) {
        outcome.answerFrames++;
        if (plan.gated) answerFramesAt.push(now);
      }
      let answered = 0;
      for (const answer of frame.answers) {
        open--;
        if (answer.error) {
          outcome.errors++;
          outcome.firstError ??= `${answer.error.sluiceErrorCode ?? ""} ${answer.error.message ?? ""}`;
          continue;
        }
        answered++;
        if (inWindow) {
          outcome.calls++;
          outcome.latenciesMs.push(now - (sentAt[answer.callId & (ring - 1)] ?? now));
          if (plan.gated) countedAt.push(now);
        }
      }
      if (answered > 0) plan.onAnswered?.();
      if (inWindow && outcome.calls > 0) plan.onCounted?.();
      if (now >= stopAt || outcome.errors > 1_000) {
        if (open === 0 || outcome.errors > 1_000) finish();
        return;
      }
      while (!stopping && open <= (plan.framesInFlight - 1) * plan.callsPerFrame) sendFrame();
    });
    stream.on("error", (error: Error) => {
      outcome.errors++;
      outcome.firstError ??= error.message;
      finish();
    });
    stream.on("end", finish);
  });

  // Connected before the start: connection setup is not load.
  await new Promise<void>((resolve) => client.waitForReady(Date.now() + 10_000, () => resolve()));
  await sleepUntil(plan.startAt);
  for (let i = 0; i < plan.framesInFlight; i++) sendFrame();
  await done;
  stream.cancel();
  client.close();
  if (plan.gated) {
    const end = plan.bounds().windowTo;
    outcome.latenciesMs = before(outcome.latenciesMs, countedAt, end);
    outcome.calls = outcome.latenciesMs.length;
    outcome.framesSent = before(sentFramesAt, sentFramesAt, end).length;
    outcome.answerFrames = before(answerFramesAt, answerFramesAt, end).length;
  }
  return outcome;
}

async function sleepUntil(epochMs: number): Promise<void> {
  const ms = epochMs - epochNow();
  if (ms > 0) await new Promise((resolve) => setTimeout(resolve, ms));
}
