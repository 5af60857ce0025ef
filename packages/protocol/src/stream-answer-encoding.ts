import type { WireQuotaStreamAnswer, WireQuotaStreamServerFrame } from "./proto-definition.ts";

// The controller's busiest output, a QuotaStreamServerFrame of RequestQuota grants, written straight
// into one buffer: the bytes protobufjs's encoder writes for the same plain objects (every field that
// is present, in field order, varints in their shortest form), without its writer's operation and
// state objects — about twenty per answer, most of the garbage a busy controller made (docs/design.md
// §11.4: a worker with many keys is answered hundreds of grants per frame). A frame with any other
// answer, or a grant whose figures are not all plain numbers, returns null: it is encoded the
// general way.

/** Tags: QuotaStreamServerFrame.answers (1), QuotaStreamAnswer.call_id (1) and .request_quota (2). */
const ANSWER_TAG = (1 << 3) | 2;
const CALL_ID_TAG = (1 << 3) | 0;
const REQUEST_QUOTA_TAG = (2 << 3) | 2;
/** RequestQuotaResponse: granted (1, double), waited_ms (2, uint64), then three doubles (3, 4, 5). */
const GRANTED_TAG = (1 << 3) | 1;
const WAITED_MS_TAG = (2 << 3) | 0;
const PACE_START_DELAY_MS_TAG = (3 << 3) | 1;
const PACE_INTERVAL_MS_TAG = (4 << 3) | 1;
const PACE_ANSWERED_AT_MS_TAG = (5 << 3) | 1;
/** The response's bytes besides the waited_ms varint: four tagged doubles and waited_ms's tag. */
const RESPONSE_FIXED_BYTES = 4 * 9 + 1;

/** The frame's bytes, or null when it is not all grants with every field a number (see above). */
export function encodeGrantFrame(frame: WireQuotaStreamServerFrame): Buffer | null {
  const answers = frame.answers;
  let size = 0;
  for (let i = 0; i < answers.length; i++) {
    const answer = answers[i] as WireQuotaStreamAnswer;
    if (!isPlainGrant(answer)) return null;
    const answerBytes = answerSize(answer);
    size += 1 + varintSize(answerBytes) + answerBytes;
  }
  const out = Buffer.allocUnsafe(size);
  let at = 0;
  for (let i = 0; i < answers.length; i++) {
    const answer = answers[i] as WireQuotaStreamAnswer;
    const grant = answer.requestQuota as NonNullable<WireQuotaStreamAnswer["requestQuota"]>;
    const responseBytes = RESPONSE_FIXED_BYTES + varintSize(grant.waitedMs);
    out[at++] = ANSWER_TAG;
    at = writeVarint(out, at, answerSize(answer));
    out[at++] = CALL_ID_TAG;
    at = writeVarint(out, at, answer.callId);
    out[at++] = REQUEST_QUOTA_TAG;
    at = writeVarint(out, at, responseBytes);
    out[at++] = GRANTED_TAG;
    at = out.writeDoubleLE(grant.granted, at);
    out[at++] = WAITED_MS_TAG;
    at = writeVarint(out, at, grant.waitedMs);
    out[at++] = PACE_START_DELAY_MS_TAG;
    at = out.writeDoubleLE(grant.paceStartDelayMs, at);
    out[at++] = PACE_INTERVAL_MS_TAG;
    at = out.writeDoubleLE(grant.paceIntervalMs, at);
    out[at++] = PACE_ANSWERED_AT_MS_TAG;
    at = out.writeDoubleLE(grant.paceAnsweredAtMs as number, at);
  }
  return out;
}

/**
 * An answer that is a grant and nothing else, whose five fields are numbers (protobufjs would write
 * a field that is absent not at all, and a string or a Long its own way), its uint64s whole numbers
 * in 0…2^53 − 1 (the varints below).
 */
function isPlainGrant(answer: WireQuotaStreamAnswer): boolean {
  const grant = answer.requestQuota;
  return (
    grant != null &&
    answer.releaseQuota == null &&
    answer.renewLeases == null &&
    answer.dynamicSpecUpdate == null &&
    answer.error == null &&
    isUint53(answer.callId) &&
    isUint53(grant.waitedMs) &&
    typeof grant.granted === "number" &&
    typeof grant.paceStartDelayMs === "number" &&
    typeof grant.paceIntervalMs === "number" &&
    typeof grant.paceAnsweredAtMs === "number"
  );
}

function isUint53(value: unknown): value is number {
  return typeof value === "number" && Number.isSafeInteger(value) && value >= 0;
}

/** The bytes of one QuotaStreamAnswer of a plain grant (isPlainGrant). */
function answerSize(answer: WireQuotaStreamAnswer): number {
  const responseBytes = RESPONSE_FIXED_BYTES + varintSize((answer.requestQuota as { waitedMs: number }).waitedMs);
  return 1 + varintSize(answer.callId) + 1 + varintSize(responseBytes) + responseBytes;
}

/** Bytes of the varint of a whole number in 0…2^53 − 1. */
function varintSize(value: number): number {
  let size = 1;
  while (value >= 128) {
    value = Math.floor(value / 128);
    size++;
  }
  return size;
}

/** Writes the varint of a whole number in 0…2^53 − 1 at `at`; returns the offset after it. */
function writeVarint(out: Buffer, at: number, value: number): number {
  while (value >= 128) {
    out[at++] = (value % 128) | 128;
    value = Math.floor(value / 128);
  }
  out[at++] = value;
  return at;
}
