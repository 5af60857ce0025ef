import { SluiceError } from "@sluice/core";
import type { QuotaServiceDefinition, WireUpdateDynamicSpecRequest } from "./proto-definition.ts";
import { specJsonEncodingProblem, wireFormatProblem } from "./spec-json-bytes.ts";

// What the server makes of a request's bytes. grpc-js answers a message that does not decode with
// INTERNAL, which clients take for a controller fault and retry; here it becomes INVALID_REQUEST
// (INVALID_ARGUMENT, not retriable) naming the method, and dynamic_spec_json must be UTF-8.

/** Stands in for a request whose bytes did not decode; the handler answers with `error`. */
export class UndecodableRequest {
  constructor(readonly error: SluiceError) {}
}

/** An UpdateDynamicSpecRequest as the server decodes it: the fields, and what is wrong with their bytes. */
export interface CheckedUpdateDynamicSpecRequest extends WireUpdateDynamicSpecRequest {
  readonly encodingProblem: SluiceError | null;
}

type Decoder<Request> = (bytes: Buffer) => Request;

function tolerant<Request>(method: string, decode: Decoder<Request>, message = `${method}Request`): Decoder<Request | UndecodableRequest> {
  return (bytes) => {
    try {
      const problem = wireFormatProblem(bytes);
      if (problem !== null) throw new Error(problem);
      return decode(bytes);
    } catch (error) {
      const reason = error instanceof Error ? error.message : String(error);
      return new UndecodableRequest(
        new SluiceError(
          "INVALID_REQUEST",
          `the ${method} request (${bytes.length} bytes) is not a valid ${message} message: ${reason}; ` + "send it with a client generated from quota.proto",
          { method, bytes: bytes.length },
        ),
      );
    }
  };
}

/** The service definition with decoders that never throw, and an UpdateDynamicSpec that checks its text's bytes. */
export function checkedServiceDefinition(definition: QuotaServiceDefinition) {
  const update = definition.UpdateDynamicSpec;
  const decodeUpdate = tolerant("UpdateDynamicSpec", update.requestDeserialize);
  return {
    RequestQuota: { ...definition.RequestQuota, requestDeserialize: tolerant("RequestQuota", definition.RequestQuota.requestDeserialize) },
    ReleaseQuota: { ...definition.ReleaseQuota, requestDeserialize: tolerant("ReleaseQuota", definition.ReleaseQuota.requestDeserialize) },
    WatchDynamicSpec: {
      ...definition.WatchDynamicSpec,
      requestDeserialize: tolerant("WatchDynamicSpec", definition.WatchDynamicSpec.requestDeserialize),
    },
    ReportWatermarks: {
      ...definition.ReportWatermarks,
      requestDeserialize: tolerant("ReportWatermarks", definition.ReportWatermarks.requestDeserialize),
    },
    RenewLeases: { ...definition.RenewLeases, requestDeserialize: tolerant("RenewLeases", definition.RenewLeases.requestDeserialize) },
    // A frame that does not decode ends its stream with INVALID_REQUEST (quota-stream-server.ts):
    // nothing in it can be trusted, not even its call ids.
    QuotaStream: {
      ...definition.QuotaStream,
      requestDeserialize: tolerant("QuotaStream", definition.QuotaStream.requestDeserialize, "QuotaStreamClientFrame"),
    },
    DescribeThrottlers: {
      ...definition.DescribeThrottlers,
      requestDeserialize: tolerant("DescribeThrottlers", definition.DescribeThrottlers.requestDeserialize),
    },
    UpdateDynamicSpec: {
      ...update,
      requestDeserialize: (bytes: Buffer): CheckedUpdateDynamicSpecRequest | UndecodableRequest => {
        const decoded = decodeUpdate(bytes);
        return decoded instanceof UndecodableRequest ? decoded : { ...decoded, encodingProblem: specJsonEncodingProblem(bytes) };
      },
    },
  };
}
