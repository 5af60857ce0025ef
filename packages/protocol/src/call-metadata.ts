import { Metadata } from "@grpc/grpc-js";
import type { CallMetadata } from "./quota-service.ts";

/** Metadata key of the shared controller token (`authorization: Bearer <token>`). */
export const AUTHORIZATION_METADATA_KEY = "authorization";

export function bearer(token: string): string {
  return `Bearer ${token}`;
}

/** Plain per-call metadata (W3C trace context and the like) as gRPC metadata, plus the token. */
export function toGrpcMetadata(metadata: CallMetadata | undefined, token: string | undefined): Metadata {
  const grpc = new Metadata();
  for (const [key, value] of Object.entries(metadata ?? {})) grpc.set(key, value);
  if (token !== undefined) grpc.set(AUTHORIZATION_METADATA_KEY, bearer(token));
  return grpc;
}

/**
 * gRPC metadata as plain strings for a handler. Binary (`-bin`) entries are left out, repeated keys
 * are joined with ", " (HTTP's rule for repeated headers), and the authorization header is dropped
 * once checked so that a token never reaches handler code or its logs.
 */
export function fromGrpcMetadata(metadata: Metadata): Record<string, string> {
  // Keys come from the caller: Object.fromEntries stores "__proto__" like any other key.
  const plain: [string, string][] = [];
  for (const [key, values] of Object.entries(metadata.getMap())) {
    if (key.endsWith("-bin") || key === AUTHORIZATION_METADATA_KEY) continue;
    const all = metadata.get(key).filter((value): value is string => typeof value === "string");
    plain.push([key, all.length > 0 ? all.join(", ") : String(values)]);
  }
  return Object.fromEntries(plain);
}
