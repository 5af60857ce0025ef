import assert from "node:assert/strict";
import { type Client, Metadata } from "@grpc/grpc-js";
import { quotaServiceDefinition } from "../src/index.ts";
import type { WireQuotaStreamCall, WireQuotaStreamServerFrame } from "../src/proto-definition.ts";

// What the QuotaStream tests share: polling for a condition, calls written by hand, and a stream
// opened on a bare grpc-js client so that a test decides what shares a frame.

export const tick = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

/** Polls `check` every `everyMs` until it holds; `ms` only bounds a hang (5,000 answers can take over 5 s at load 30). */
export async function eventually(check: () => boolean, what: string, ms = 60_000, everyMs = 10): Promise<void> {
  const end = performance.now() + ms;
  while (!check()) {
    if (performance.now() > end) assert.fail(`timed out waiting for ${what}`);
    await tick(everyMs);
  }
}

/** A RequestQuota call of throttler "api" for `callId` units (so that answers can be told apart by amount). */
export function requestCall(callId: number, options: { timeoutMs?: number; requestId?: string } = {}): WireQuotaStreamCall {
  return {
    callId,
    timeoutMs: options.timeoutMs ?? 0,
    metadata: {},
    requestQuota: {
      throttlerId: "api",
      clientId: "c",
      amount: callId,
      timestampMs: 0,
      quotaClassId: "",
      requestId: options.requestId ?? `r${callId}`,
    },
  };
}

export const cancelCall = (callId: number): WireQuotaStreamCall => ({ callId, timeoutMs: 0, metadata: {}, cancel: {} });

/** Opens a QuotaStream on `client` and collects the frames it is sent. */
export function openStream(client: Client) {
  const method = quotaServiceDefinition().QuotaStream;
  const stream = client.makeBidiStreamRequest(method.path, method.requestSerialize, method.responseDeserialize, new Metadata());
  const frames: WireQuotaStreamServerFrame[] = [];
  let ended = false;
  stream.on("data", (frame: WireQuotaStreamServerFrame) => frames.push(frame));
  stream.on("error", () => (ended = true));
  stream.on("end", () => (ended = true));
  return { stream, frames, answers: () => frames.flatMap((frame) => frame.answers), ended: () => ended };
}
