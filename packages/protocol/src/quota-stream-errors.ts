import { Metadata, type ServiceError } from "@grpc/grpc-js";
import type { SluiceError } from "@sluice/core";
import { ERROR_CODE_METADATA_KEY, ERROR_DETAILS_METADATA_KEY, LEADER_METADATA_KEY, fromGrpcError, toServiceError, type CallSite } from "./error-mapping.ts";
import type { WireQuotaStreamError } from "./proto-definition.ts";

// An error on the quota stream is the status and trailers its unary call would have ended with,
// carried in a QuotaStreamError. Both ends go through error-mapping.ts, so a client sees the very
// SluiceError (code, message, figures, leader) that the unary RPC would have given it.

/** Server side: what a handler threw, as the unary server would have sent it. */
export function toStreamError(error: unknown): WireQuotaStreamError {
  return streamErrorOfStatus(toServiceError(error));
}

/** A status (code, message, trailers) as a QuotaStreamError. */
export function streamErrorOfStatus(status: { readonly code: number; readonly details: string; readonly metadata?: Metadata }): WireQuotaStreamError {
  const metadata = status.metadata ?? new Metadata();
  const code = metadata.get(ERROR_CODE_METADATA_KEY)[0];
  const figures = metadata.get(ERROR_DETAILS_METADATA_KEY)[0];
  const leader = metadata.get(LEADER_METADATA_KEY)[0];
  return {
    grpcStatus: status.code,
    message: status.details,
    sluiceErrorCode: typeof code === "string" ? code : "",
    detailsJson: Buffer.isBuffer(figures) ? figures.toString("utf8") : "",
    leader: typeof leader === "string" ? leader : "",
  };
}

/** Client side: the SluiceError a unary call ending with this status would have rejected with. */
export function fromStreamError(wire: WireQuotaStreamError, site: CallSite): SluiceError {
  return fromGrpcError(serviceErrorOf(wire), site);
}

/** The status as grpc-js would hand it to a unary callback. */
export function serviceErrorOf(wire: WireQuotaStreamError): ServiceError {
  const metadata = new Metadata();
  if (wire.sluiceErrorCode !== "") metadata.set(ERROR_CODE_METADATA_KEY, wire.sluiceErrorCode);
  if (wire.detailsJson !== "") metadata.set(ERROR_DETAILS_METADATA_KEY, Buffer.from(wire.detailsJson, "utf8"));
  if (wire.leader !== "") metadata.set(LEADER_METADATA_KEY, wire.leader);
  return Object.assign(new Error(wire.message), { code: wire.grpcStatus, details: wire.message, metadata });
}
