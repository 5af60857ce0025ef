import { SluiceError } from "@sluice/core";
import { createGrpcQuotaClient, type GrpcQuotaClientOptions } from "./grpc-client.ts";
import { createStreamQuotaClient } from "./quota-stream-client.ts";
import type { QuotaServiceClient } from "./quota-service.ts";

/**
 * How a worker's quota calls travel to the controller: "stream" (the default) multiplexes them on
 * one QuotaStream; "unary" makes one RPC per call, as other languages' clients do.
 */
export type QuotaTransport = "stream" | "unary";

export const QUOTA_TRANSPORTS: readonly QuotaTransport[] = ["stream", "unary"];
export const DEFAULT_QUOTA_TRANSPORT: QuotaTransport = "stream";
/** Environment variable that chooses the transport of `sluice run`, `sluice worker` and connectThrottlers. */
export const QUOTA_TRANSPORT_ENV = "SLUICE_QUOTA_TRANSPORT";

/** A value of SLUICE_QUOTA_TRANSPORT (or an option) as a transport; unset or empty = the default. */
export function parseQuotaTransport(value: string | undefined, where = QUOTA_TRANSPORT_ENV): QuotaTransport {
  if (value === undefined || value.trim() === "") return DEFAULT_QUOTA_TRANSPORT;
  const transport = value.trim().toLowerCase();
  if (transport === "stream" || transport === "unary") return transport;
  throw new SluiceError(
    "SPEC_INVALID",
    `${where} is ${JSON.stringify(value)}: choose "stream" (one multiplexed stream per worker, the default) or "unary" (one RPC per call)`,
    { where, value, allowed: QUOTA_TRANSPORTS },
  );
}

export interface QuotaClientOptions extends GrpcQuotaClientOptions {
  /** Default: SLUICE_QUOTA_TRANSPORT, else "stream". */
  readonly transport?: QuotaTransport;
}

/** A client of the controller at `address` over the chosen transport; both have the same semantics. */
export function createQuotaClient(address: string, options: QuotaClientOptions = {}): QuotaServiceClient {
  const transport = options.transport ?? parseQuotaTransport(process.env[QUOTA_TRANSPORT_ENV]);
  return transport === "unary" ? createGrpcQuotaClient(address, options) : createStreamQuotaClient(address, options);
}
