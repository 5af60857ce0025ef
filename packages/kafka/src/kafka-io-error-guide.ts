import type { KafkaIoErrorCode } from "./kafka-io-error.ts";

/**
 * What each KafkaIoError code means and what to do about it: the Kafka half of the error-code
 * reference (docs/reference/errors.md, generated). A Record over every code, so a new code does not
 * type-check until it is explained. Inside a pipeline, any failed iteration rewinds the job to its
 * last commit and retries with backoff whatever the code; `retriable` tells a direct user of the
 * adapter whether the same call can succeed later.
 */
export const KAFKA_IO_ERROR_GUIDE: Readonly<Record<KafkaIoErrorCode, { readonly meaning: string; readonly action: string }>> = {
  KAFKA_SPEC_INVALID: {
    meaning: "The pipeline spec has no `kafka` section, or names a stream or computation that is not declared.",
    action: "Fix the spec (`sluice validate` checks the references); the same spec fails again.",
  },
  PARTITION_REVOKED: {
    meaning:
      "The partition was taken away (rebalance, expulsion, a fenced transactional producer) or the source stopped; the next owner resumes from the last commit.",
    action: "Nothing: the work moves to the partition's new owner. Frequent revocations mean members miss `session_timeout`.",
  },
  CLOSED: {
    meaning: "The source, sink or I/O factory was closed while something still used it.",
    action: "Nothing during shutdown; otherwise stop using the adapter after `close()`.",
  },
  SOURCE_START_FAILED: {
    meaning: "A consumer could not connect, subscribe or join its group in time (the controller's state reader included).",
    action:
      "Check that the brokers in `kafka.brokers` are reachable and the group can be joined (a slow join of many members may need a longer start-up), then start again.",
  },
  CONSUMER_CRASHED: {
    meaning: "kafkajs gave up on the consumer and will not restart it.",
    action: "The source stops for good: look at the cause in the message (broker down, authorisation), fix it and restart the worker.",
  },
  COMMIT_FAILED: {
    meaning: "An offset commit failed or was malformed; the rows after the last landed commit are processed again after a restart (at-least-once).",
    action: "Nothing for a transient broker error; a malformed offset is a bug to report.",
  },
  HANDLER_FAILED: {
    meaning: "A BatchHandler threw (it should not: the runtime's job turns failures into rewinds); the partition was rewound.",
    action: "Report it: the runtime's handler is meant to never throw.",
  },
  LISTENER_FAILED: {
    meaning: "A SourceListener callback threw; kafkajs was shielded from it.",
    action: "Fix the listener; the source keeps running.",
  },
  SEND_FAILED: {
    meaning: "The producer could not connect or a send was not acknowledged (stream output, or a record of the controller's state topic).",
    action: "Check the brokers; the job rewinds and sends again (duplicates are possible unless `delivery` is `exactly_once`).",
  },
  TRANSACTION_FAILED: {
    meaning:
      'With `delivery: "exactly_once"`: claiming a partition\'s transactional id, or a transaction, failed; the batch is redone from the last committed transaction.',
    action: "Nothing for a transient broker error; if it repeats, check the brokers' transaction coordinator and `transaction.state.log` settings.",
  },
  INVALID_RECORD: {
    meaning: "A record asks for a partition the topic does not have, carries an invalid timestamp, or is otherwise malformed.",
    action: "Fix the computation's output (partition index, `timestampMs`); the same record fails again.",
  },
  TOPIC_SETUP_FAILED: {
    meaning: "Creating or checking the pipeline's topics (streams, controller state) failed.",
    action: "Check that the brokers are reachable and allow topic creation, or create the topics yourself with the declared partition counts.",
  },
};
