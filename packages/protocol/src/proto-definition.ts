import type { MethodDefinition } from "@grpc/grpc-js";
import { loadSync } from "@grpc/proto-loader";
import protobuf from "protobufjs";
import { fileURLToPath } from "node:url";
import { encodeGrantFrame } from "./stream-answer-encoding.ts";
import { decodeRequestFrame } from "./stream-frame-decoding.ts";

// The QuotaService as @grpc/proto-loader reads it from quota.proto (docs/design.md §4). Messages are plain
// objects with camelCase fields (keepCase false), every field present (defaults true), and uint64
// fields as JS numbers (longs: Number): timestamps and waits in ms stay far below 2^53.

export const QUOTA_PROTO_PATH = fileURLToPath(new URL("../proto/sluice/throttler/v1/quota.proto", import.meta.url));

/** The service's full name, as it appears in gRPC paths (`/sluice.throttler.v1.QuotaService/...`). */
export const QUOTA_SERVICE_NAME = "sluice.throttler.v1.QuotaService";

export interface WireRequestQuotaRequest {
  throttlerId: string;
  clientId: string;
  amount: number;
  timestampMs: number;
  quotaClassId: string;
  requestId: string;
  /** "" or absent = not keyed (an old client sends none). */
  key?: string;
}
export interface WireRequestQuotaResponse {
  granted: number;
  waitedMs: number;
  paceStartDelayMs: number;
  paceIntervalMs: number;
  paceAnsweredAtMs?: number;
}
export interface WireReleaseQuotaRequest {
  throttlerId: string;
  clientId: string;
  amount: number;
  quotaClassId: string;
  key?: string;
}
export type WireReleaseQuotaResponse = Record<string, never>;
export interface WireWatchDynamicSpecRequest {
  clientId: string;
}
export interface WireDynamicSpecUpdate {
  version: number;
  dynamicSpecJson: string;
}
export interface WireUpdateDynamicSpecRequest {
  dynamicSpecJson: string;
}
export interface WireUpdateDynamicSpecResponse {
  version: number;
}
export interface WireDescribeThrottlersRequest {
  /** "" or absent (an old client) = every throttler. */
  throttlerId?: string;
  key?: string;
}
export interface WireDescribeThrottlersResponse {
  snapshotJson: string;
}

export interface WireRenewLeasesRequest {
  clientId: string;
  throttlerIds: string[];
  key?: string;
}
export interface WireRenewLeasesResponse {
  held: number;
}

export interface WirePartitionWatermark {
  groupName: string;
  partitionId: string;
  watermarkMs: number;
  idle: boolean;
  held: boolean;
}
export interface WireReportWatermarksRequest {
  clientId: string;
  partitions: WirePartitionWatermark[];
}
export interface WirePartitionBound {
  partitionId: string;
  othersWatermarkMs: number;
  unbounded: boolean;
}
export interface WireGroupWatermark {
  groupName: string;
  watermarkMs: number;
  partitions: number;
  held: number;
  idle: number;
}
export interface WireReportWatermarksResponse {
  bounds: WirePartitionBound[];
  groups: WireGroupWatermark[];
  controllerInstance: string;
  settling: boolean;
}

// ── The quota stream (issue #14): one stream, many calls (quota-stream-*.ts) ──

/** The call a QuotaStreamCall carries, as proto-loader names the oneof (`call`). */
export type WireQuotaStreamCallKind = "requestQuota" | "releaseQuota" | "renewLeases" | "watchDynamicSpec" | "cancel";
export interface WireQuotaStreamCall {
  callId: number;
  timeoutMs: number;
  metadata: Record<string, string>;
  call?: WireQuotaStreamCallKind;
  requestQuota?: WireRequestQuotaRequest;
  releaseQuota?: WireReleaseQuotaRequest;
  renewLeases?: WireRenewLeasesRequest;
  watchDynamicSpec?: WireWatchDynamicSpecRequest;
  cancel?: Record<string, never>;
}
export interface WireQuotaStreamClientFrame {
  calls: WireQuotaStreamCall[];
}
export interface WireQuotaStreamError {
  grpcStatus: number;
  message: string;
  sluiceErrorCode: string;
  detailsJson: string;
  leader: string;
}
export type WireQuotaStreamAnswerKind = "requestQuota" | "releaseQuota" | "renewLeases" | "dynamicSpecUpdate" | "error";
export interface WireQuotaStreamAnswer {
  callId: number;
  answer?: WireQuotaStreamAnswerKind;
  requestQuota?: WireRequestQuotaResponse;
  releaseQuota?: WireReleaseQuotaResponse;
  renewLeases?: WireRenewLeasesResponse;
  dynamicSpecUpdate?: WireDynamicSpecUpdate;
  error?: WireQuotaStreamError;
}
export interface WireQuotaStreamServerFrame {
  answers: WireQuotaStreamAnswer[];
}

/** A type alias, not an interface, so it is assignable to grpc-js's index-signature ServiceDefinition. */
export type QuotaServiceDefinition = {
  readonly RequestQuota: MethodDefinition<WireRequestQuotaRequest, WireRequestQuotaResponse>;
  readonly ReleaseQuota: MethodDefinition<WireReleaseQuotaRequest, WireReleaseQuotaResponse>;
  readonly WatchDynamicSpec: MethodDefinition<WireWatchDynamicSpecRequest, WireDynamicSpecUpdate>;
  readonly UpdateDynamicSpec: MethodDefinition<WireUpdateDynamicSpecRequest, WireUpdateDynamicSpecResponse>;
  readonly DescribeThrottlers: MethodDefinition<WireDescribeThrottlersRequest, WireDescribeThrottlersResponse>;
  readonly RenewLeases: MethodDefinition<WireRenewLeasesRequest, WireRenewLeasesResponse>;
  readonly ReportWatermarks: MethodDefinition<WireReportWatermarksRequest, WireReportWatermarksResponse>;
  readonly QuotaStream: MethodDefinition<WireQuotaStreamClientFrame, WireQuotaStreamServerFrame>;
};

let loaded: QuotaServiceDefinition | undefined;

/** Parsed once per process; servers and clients share the same definition. */
export function quotaServiceDefinition(): QuotaServiceDefinition {
  if (loaded) return loaded;
  const definitions = loadSync(QUOTA_PROTO_PATH, { keepCase: false, longs: Number, enums: String, defaults: true, oneofs: true });
  const service = definitions[QUOTA_SERVICE_NAME];
  if (!service || !("RequestQuota" in service)) {
    throw new Error(`${QUOTA_PROTO_PATH} does not define service ${QUOTA_SERVICE_NAME} with RequestQuota`);
  }
  // proto-loader types every method as MethodDefinition<object, object>; the message shapes above
  // are what quota.proto declares, under the load options used here.
  const methods = service as unknown as QuotaServiceDefinition;
  const general = methods.QuotaStream.requestDeserialize;
  loaded = {
    ...methods,
    QuotaStream: {
      ...methods.QuotaStream,
      ...directStreamSerializers(),
      // Frames of RequestQuota calls without protobufjs's instances; the rest, and any bytes the fast
      // decoder does not take (malformed ones included, whose error is the general decoder's), as before.
      requestDeserialize: (bytes: Buffer) => {
        try {
          const frame = decodeRequestFrame(bytes);
          if (frame !== null) return frame;
        } catch {
          // fall through: the general decoder says what is wrong
        }
        return general(bytes);
      },
    },
  };
  return loaded;
}

/**
 * QuotaStream's frames encoded straight from the plain objects the stream code builds. proto-loader's
 * serializer first copies every message into a protobufjs instance (`fromObject`: an object per
 * call or answer and per nested message, per frame) and then encodes the copy; protobufjs's
 * `encode` reads plain objects with the same camelCase fields as well, and the bytes are the same.
 * Only for QuotaStream, the busy path (bench/README.md, group 8); its frames of RequestQuota calls are
 * decoded by stream-frame-decoding.ts.
 */
function directStreamSerializers(): Pick<MethodDefinition<WireQuotaStreamClientFrame, WireQuotaStreamServerFrame>, "requestSerialize" | "responseSerialize"> {
  const root = protobuf.loadSync(QUOTA_PROTO_PATH);
  const clientFrame = root.lookupType("sluice.throttler.v1.QuotaStreamClientFrame");
  const serverFrame = root.lookupType("sluice.throttler.v1.QuotaStreamServerFrame");
  const asBuffer = (bytes: Uint8Array): Buffer => (Buffer.isBuffer(bytes) ? bytes : Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength));
  return {
    requestSerialize: (frame) => asBuffer(clientFrame.encode(frame).finish()),
    // Frames of grants, most of what a busy controller writes, without protobufjs's writer (stream-answer-encoding.ts).
    responseSerialize: (frame) => encodeGrantFrame(frame) ?? asBuffer(serverFrame.encode(frame).finish()),
  };
}
