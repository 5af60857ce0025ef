import type { SluiceErrorCode } from "./sluice-error.ts";

/**
 * What a caller should do on each code: the "what to do" column of the error-code reference
 * (docs/reference/errors.md, generated). A Record over every code, so a new code does not
 * type-check until it says what to do.
 */
export const ERROR_ACTIONS: Readonly<Record<SluiceErrorCode, string>> = {
  SPEC_INVALID:
    "Fix the spec at the JSON path the message names (`sluice validate <spec.json>` shows every problem at once); retrying the same spec fails again.",
  THROTTLER_NOT_DECLARED:
    "Declare the throttler in `dynamic_spec.throttlers` (a reconfiguration will do), or call `getThrottlerOrThrow` with an id the message lists as declared.",
  UNKNOWN_THROTTLER:
    "Nothing, usually: clients retry while a restarted controller loads its spec. If it lasts, the controller runs another spec than the workers: `sluice reconfigure` it or restart it with the workers' spec.",
  THROTTLER_REMOVED: "Declare the throttler again with `sluice reconfigure`, or stop calling it; retrying does not bring it back.",
  INVALID_AMOUNT: "Pass a finite amount ≥ 0 within the figures the message gives; this is a bug in the caller, not a transient state.",
  INVALID_REQUEST: "Fix the client: shorten the id (at most 1024 characters) or send a message that decodes as the RPC's protobuf type.",
  QUEUE_FULL: "Retry with backoff (the Sluice client does); if it persists, raise `max_queue_size` or the limit, or send fewer concurrent requests.",
  QUOTA_TIMEOUT:
    "Retry with the same request id to keep the place in the queue (the Sluice client does); if it persists the limit is too low for the demand, or `rpc_timeout` too short.",
  CONTROLLER_UNAVAILABLE:
    "Retry with backoff under the same request id (the Sluice client does). It also comes from a follower of a failover group, naming the leader in `sluice-leader` (clients go there), and from a leader that could not persist its state. If it lasts, check that a controller is running, reachable at the spec's address, and that its Kafka brokers are.",
  RETRIES_EXHAUSTED:
    "The job fails and restarts from its last commit; find why the controller kept refusing (the cause is in the message) or raise `retrying_channel.retry_attempts` / `retry_timeout`.",
  CANCELLED: "Nothing: the caller cancelled, and any quota granted to the request went back to the bucket.",
  TOO_MANY_CALLS:
    "Wait for an open call of this stream to be answered before sending another, or open another stream (the Sluice client queues its calls under the bound and never sees this); if a well-behaved client needs more, raise `controller.max_open_calls_per_stream`.",
  TOO_MANY_KEYS:
    "Use fewer distinct keys (a key per customer, model or host, not per request), or raise `keyed.max_keys`; keys idle for `keyed.idle_timeout` with a full bucket are forgotten and make room. Retrying at once fails again.",
  LEASE_EXPIRED:
    "Nothing to retry on the same units: the controller gave them to others after `lease_timeout` without a renewal. Redo the work they admitted (the job's backoff does for input throttling) and find what stalled this process past `lease_timeout`, or raise it.",
  UNAUTHENTICATED:
    "Give the client the controller's token (`SLUICE_CONTROLLER_TOKEN`) or a certificate its `--tls-client-ca` accepts; retrying with the same credentials fails again.",
};
