import { ERROR_ACTIONS, ERROR_CODES, SLUICE_ERROR_CODES } from "../../packages/core/src/index.ts";
import { KAFKA_IO_ERROR_CODES, KAFKA_IO_ERROR_GUIDE, type KafkaIoErrorCode } from "../../packages/kafka/src/index.ts";
import {
  ERROR_CODE_METADATA_KEY,
  ERROR_DETAILS_METADATA_KEY,
  GRPC_STATUS_BY_CODE,
  grpcStatusName,
  LEADER_METADATA_KEY,
} from "../../packages/protocol/src/index.ts";
import { code, page, table } from "./markdown.ts";

// docs/reference/errors.md from the error tables: core's ERROR_CODES and ERROR_ACTIONS, protocol's
// GRPC_STATUS_BY_CODE, and the Kafka adapter's KAFKA_IO_ERROR_CODES and KAFKA_IO_ERROR_GUIDE.

const yesNo = (value: boolean) => (value ? "yes" : "no");

export function errorsReferencePage(): string {
  const kafkaCodes = Object.keys(KAFKA_IO_ERROR_CODES) as KafkaIoErrorCode[];
  return page("Error codes reference", [
    "## SluiceError",
    [
      "Every refusal of the throttler, the controller and the client is a `SluiceError` (from `@sluice/core`)",
      "with a stable `code` to branch on, `retriable`, `details` (the figures) and a message that names what",
      "was wrong, where and the figures: `QUEUE_FULL: <text>`. Over gRPC each code travels as the status",
      `below, with the code itself in the trailer ${code(ERROR_CODE_METADATA_KEY)}, the figures as JSON in`,
      `${code(ERROR_DETAILS_METADATA_KEY)} and, on a follower's refusal, the leader's address in ${code(LEADER_METADATA_KEY)}.`,
      'A gRPC status of — marks a code a client raises itself and no server sends. "Quota consumed" says',
      "whether units granted to the failed request stay spent.",
    ].join("\n"),
    table(
      ["code", "gRPC status", "retriable", "quota consumed", "meaning", "what to do"],
      SLUICE_ERROR_CODES.map((c) => {
        const status = GRPC_STATUS_BY_CODE[c];
        return [
          code(c),
          status === null ? "—" : grpcStatusName(status),
          yesNo(ERROR_CODES[c].retriable),
          ERROR_CODES[c].quotaConsumed,
          ERROR_CODES[c].meaning,
          ERROR_ACTIONS[c],
        ];
      }),
    ),
    "## KafkaIoError",
    [
      "What the Kafka adapter (`@sluice/kafka`) refuses or fails at: a `KafkaIoError` with a stable `code`,",
      "`retriable`, `details` and a message naming the computation, group, stream, topic, partition and",
      "offsets involved. Inside a pipeline every failed iteration rewinds its job to the last commit and",
      "retries with backoff whatever the code; `retriable` tells a direct user of the adapter whether the",
      "same call can succeed later.",
    ].join("\n"),
    table(
      ["code", "retriable", "meaning", "what to do"],
      kafkaCodes.map((c) => [code(c), yesNo(KAFKA_IO_ERROR_CODES[c].retriable), KAFKA_IO_ERROR_GUIDE[c].meaning, KAFKA_IO_ERROR_GUIDE[c].action]),
    ),
  ]);
}
