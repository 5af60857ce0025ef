import * as z from "zod";
import { DESPITE_INNER_ISSUES, isPlainObject } from "./cross-check.ts";
import { COMPUTATION_DEFAULTS, CONTROLLER_DEFAULTS, KAFKA_DEFAULTS, STREAM_DEFAULTS } from "./defaults.ts";
import { quoteList } from "./describe-value.ts";
import { duration } from "./duration.ts";
import { dynamicSpecSchema, undeclaredComputations } from "./dynamic-spec.ts";
import { hostPortSchema } from "./host-port.ts";
import { integer } from "./integer.ts";
import { notDeclaredMessage } from "./not-declared.ts";
import { mustBe } from "./rule-error.ts";
import { watermarkAlignmentSpecSchema } from "./watermark-alignment-spec.ts";

// The pipeline spec file (docs/design.md §8). Everything but `dynamic_spec` needs a restart to change.

/** The pipeline name prefixes Kafka consumer group ids, so it keeps to Kafka's legal characters. */
export const PIPELINE_NAME_PATTERN = /^[A-Za-z0-9._-]+$/;

/** Kafka's rule for topic names: legal characters, at most 249 of them, and not "." or "..". */
const TOPIC_PATTERN = /^[A-Za-z0-9._-]{1,249}$/;

export const MAX_ROWS_PER_BATCH_LIMIT = 100_000;

/** Largest `controller.max_open_calls_per_stream`: a million waiting calls is already ~1 GB of controller memory. */
export const MAX_OPEN_CALLS_PER_STREAM_LIMIT = 1_000_000;

export const STREAM_FORMATS = ["json", "string", "bytes"] as const;
/** docs/design.md §13: whether a batch's outputs and its input offsets commit in one Kafka transaction. */
export const DELIVERY_MODES = ["at_least_once", "exactly_once"] as const;

const pipelineNameRule = mustBe("a non-empty name of letters, digits, '.', '_' and '-'");

const topicRule = mustBe('a Kafka topic name: 1 to 249 characters from A-Z a-z 0-9 . _ -, and not "." or ".."');

const nonEmptyName = (what: string) => z.string().min(1, { error: `${what} must not be empty` });

const modulePath = (what: string) =>
  z
    .string({ error: mustBe(`a path to ${what}, relative to the spec file`) })
    .min(1)
    .describe(`Path to ${what}, resolved relative to the spec file; TypeScript is loaded directly.`);

export const kafkaSpecSchema = z
  .strictObject(
    {
      brokers: z
        .array(hostPortSchema, { error: mustBe('a non-empty array of "host:port" addresses') })
        .min(1)
        .describe('Bootstrap brokers, "host:port".'),
      client_id: z
        .string({ error: mustBe("a non-empty string") })
        .min(1)
        .optional()
        .describe("Kafka client id; absent = Sluice picks one."),
      session_timeout: duration({ minMs: 0, exclusive: true })
        .prefault(KAFKA_DEFAULTS.session_timeout)
        .describe(
          "Consumer group session timeout: how soon the partitions of a worker that died move to the others. " +
            `Workers heartbeat while they wait for quota, so a long throttle wait does not need a long timeout. ` +
            `It is also the controllers' failover time: a dead leader is replaced about this long after its last heartbeat (at least 6s). Default "${KAFKA_DEFAULTS.session_timeout}".`,
        ),
    },
    { error: mustBe("an object") },
  )
  .describe("Kafka connection. Absent = embedded mode: streams are in-memory partitioned logs.");

const pemFile = (what: string) =>
  z
    .string({ error: mustBe(`a path to ${what}, relative to the spec file`) })
    .min(1, { error: mustBe(`a path to ${what}, relative to the spec file`) })
    .optional();

export const controllerTlsSpecSchema = z
  .strictObject(
    {
      ca: pemFile("the PEM CA certificate(s) that signed the controller's certificate").describe(
        "PEM file of the CA that signed the controller's certificate, relative to the spec file. Absent = the system's trusted roots.",
      ),
      cert: pemFile("this client's PEM certificate").describe(
        "PEM client certificate, for a controller that requires one (mutual TLS, `--tls-client-ca`); relative to the spec file. Needs key.",
      ),
      key: pemFile("the PEM private key of cert").describe("PEM private key of cert, relative to the spec file. Needs cert."),
      server_name: z
        .string({ error: mustBe("a host name") })
        .min(1, { error: mustBe("a host name") })
        .optional()
        .describe("Name the controller's certificate must carry when it differs from the host of the address."),
    },
    { error: mustBe("an object") },
  )
  .superRefine((tls, ctx) => {
    // Each names the one missing, at the path of the one present.
    if (tls.cert !== undefined && tls.key === undefined) {
      ctx.addIssue({ code: "custom", path: ["cert"], input: tls.cert, message: "cert needs key (the client certificate's private key) beside it" });
    }
    if (tls.key !== undefined && tls.cert === undefined) {
      ctx.addIssue({ code: "custom", path: ["key"], input: tls.key, message: "key needs cert (the client certificate it belongs to) beside it" });
    }
  })
  .describe("Connect to the controller with TLS (its `--tls-cert`); present = TLS, even if empty ({} trusts the system's roots).");

export const controllerSpecSchema = z
  .strictObject(
    {
      address: hostPortSchema.optional().describe('Address of the controller\'s gRPC server, "host:port". Absent = `sluice run` starts one in-process.'),
      addresses: z
        .array(hostPortSchema, { error: mustBe('a non-empty array of "host:port" addresses') })
        .min(1, { error: 'must list at least one "host:port" address' })
        .optional()
        .describe(
          'Addresses of every controller of a failover group (docs/design.md §5.2), "host:port" each. Clients follow ' +
            "the leader: a follower answers UNAVAILABLE naming it (trailer sluice-leader). Use instead of `address`.",
        ),
      tls: controllerTlsSpecSchema.optional(),
      max_open_calls_per_stream: integer(`an integer from 1 to ${MAX_OPEN_CALLS_PER_STREAM_LIMIT}`, { min: 1, max: MAX_OPEN_CALLS_PER_STREAM_LIMIT })
        .prefault(CONTROLLER_DEFAULTS.max_open_calls_per_stream)
        .describe(
          "Calls one QuotaStream (one worker's connection) may hold open on the controller at once: waiting quota " +
            "requests, watches, renewals. More are refused at once with TOO_MANY_CALLS, so a broken or hostile client " +
            "cannot exhaust the controller's memory; Sluice's own clients queue past the bound instead of sending. " +
            `Read by \`sluice controller\` and \`sluice run\`. Default ${CONTROLLER_DEFAULTS.max_open_calls_per_stream}.`,
        ),
    },
    { error: mustBe("an object") },
  )
  .superRefine((value, ctx) => {
    if (value.address !== undefined && value.addresses !== undefined) {
      ctx.addIssue({
        code: "custom",
        path: ["addresses"],
        input: value.addresses,
        message: 'set either "address" (one controller) or "addresses" (a failover group), not both',
      });
    }
    const seen = new Set<string>();
    (value.addresses ?? []).forEach((address, index) => {
      if (seen.has(address))
        ctx.addIssue({ code: "custom", path: ["addresses", index], input: address, message: `${JSON.stringify(address)} is listed twice` });
      seen.add(address);
    });
  })
  .describe("Where workers find the controller.");

/** The controller addresses a client may use, in the spec's order: `addresses`, else `[address]`, else none. */
export function controllerAddressesOf(
  controller: { readonly address?: string | undefined; readonly addresses?: readonly string[] | undefined } | undefined,
): string[] {
  if (controller?.addresses !== undefined) return [...controller.addresses];
  return controller?.address !== undefined ? [controller.address] : [];
}

export const generatorSpecSchema = z
  .strictObject(
    {
      module: modulePath("a module whose default export is a function (index) => message"),
      messages: integer("an integer ≥ 0", { min: 0 }).describe("How many messages the generator produces."),
      rate_per_second: z
        .number({ error: mustBe("a finite number greater than 0") })
        .gt(0)
        .optional()
        .describe("Messages per second; absent = as fast as the stream accepts them."),
    },
    { error: mustBe("an object") },
  )
  .describe("Embedded mode: fills the stream with generated messages.");

export const streamSpecSchema = z
  .strictObject(
    {
      topic: z
        .string({ error: topicRule })
        .regex(TOPIC_PATTERN, { error: topicRule })
        .refine((topic) => topic !== "." && topic !== "..", { error: topicRule })
        .describe("Kafka topic (or in-memory log) of the stream; no two streams share one."),
      format: z
        .enum(STREAM_FORMATS, { error: mustBe(`one of ${quoteList(STREAM_FORMATS)}`) })
        .prefault(STREAM_DEFAULTS.format)
        .describe(
          `How message values are decoded and encoded: "json" (parsed JSON), "string" (UTF-8 text), "bytes" (Uint8Array). ` +
            `Default "${STREAM_DEFAULTS.format}".`,
        ),
      partitions: integer("an integer ≥ 1", { min: 1 })
        .prefault(STREAM_DEFAULTS.partitions)
        .describe("Partition count of the in-memory log in embedded mode and of topics Sluice creates. " + `Default ${STREAM_DEFAULTS.partitions}.`),
      stream_delay: duration()
        .prefault(STREAM_DEFAULTS.stream_delay)
        .describe(`Added to the event timestamps of this stream when computing a job's lag priority. Default 0.`),
      generator: generatorSpecSchema.optional(),
    },
    { error: mustBe("an object") },
  )
  .describe("A named stream: a Kafka topic with a value format.");

export const computationSpecSchema = z
  .strictObject(
    {
      module: modulePath("a module whose default export is defineComputation(...)"),
      inputs: z
        .array(z.string({ error: mustBe("a stream name") }), { error: mustBe("a non-empty array of stream names") })
        .min(1)
        .describe("Streams the computation reads; at least one."),
      outputs: z
        .array(z.string({ error: mustBe("a stream name") }), { error: mustBe("an array of stream names") })
        .prefault(() => [])
        .describe("Streams the computation may emit to. Default []."),
      max_rows_per_batch: integer(`an integer from 1 to ${MAX_ROWS_PER_BATCH_LIMIT}`, { min: 1, max: MAX_ROWS_PER_BATCH_LIMIT })
        .prefault(COMPUTATION_DEFAULTS.max_rows_per_batch)
        .describe(`Most messages handed to one process() call. Default ${COMPUTATION_DEFAULTS.max_rows_per_batch}.`),
      delivery: z
        .enum(DELIVERY_MODES, { error: mustBe(`one of ${quoteList(DELIVERY_MODES)}`) })
        .prefault(COMPUTATION_DEFAULTS.delivery)
        .describe(
          '"at_least_once": outputs are acknowledged, then the offset is committed (a crash may repeat a batch). ' +
            '"exactly_once": with Kafka, a batch\'s outputs and its input offsets commit in one transaction, so a read_committed ' +
            `consumer sees each input's outputs once. Default "${COMPUTATION_DEFAULTS.delivery}".`,
        ),
      watermark_alignment: watermarkAlignmentSpecSchema.optional(),
    },
    { error: mustBe("an object") },
  )
  .describe("A named computation: user code over batches of its input streams.");

export const pipelineSpecSchema = z
  .strictObject(
    {
      $schema: z
        .string({ error: mustBe("a string") })
        .optional()
        .describe("Optional JSON Schema reference for editors (`sluice schema` prints the schema); ignored."),
      pipeline: z
        .string({ error: pipelineNameRule })
        .regex(PIPELINE_NAME_PATTERN, { error: pipelineNameRule })
        .describe("Pipeline name; prefixes Kafka consumer group ids."),
      kafka: kafkaSpecSchema.optional(),
      controller: controllerSpecSchema.optional(),
      streams: z.record(nonEmptyName("stream name"), streamSpecSchema, { error: mustBe("an object of stream name → stream") }).describe("Streams by name."),
      computations: z
        .record(nonEmptyName("computation name"), computationSpecSchema, {
          error: mustBe("an object of computation name → computation"),
        })
        .describe("Computations by name."),
      dynamic_spec: dynamicSpecSchema.prefault({}),
    },
    { error: mustBe("an object") },
  )
  .superRefine(checkPipelineReferences, DESPITE_INNER_ISSUES)
  .describe("A Sluice pipeline: streams, computations and distributed throttlers.");

/** Stream names used by computations exist, dynamic settings name real computations, topics are unique. */
function checkPipelineReferences(value: unknown, ctx: z.RefinementCtx): void {
  if (!isPlainObject(value)) return;
  const { streams, computations, dynamic_spec: dynamicSpec } = value;

  if (isPlainObject(streams) && isPlainObject(computations)) {
    const declared = Object.keys(streams);
    for (const [name, computation] of Object.entries(computations)) {
      if (!isPlainObject(computation)) continue;
      for (const key of ["inputs", "outputs"] as const) {
        const names = computation[key];
        if (!Array.isArray(names)) continue;
        names.forEach((stream: unknown, index) => {
          if (typeof stream !== "string" || Object.hasOwn(streams, stream)) return;
          ctx.addIssue({
            code: "custom",
            path: ["computations", name, key, index],
            input: stream,
            message: notDeclaredMessage("stream", stream, "streams", declared),
          });
        });
      }
    }
  }

  if (isPlainObject(computations) && isPlainObject(dynamicSpec) && isPlainObject(dynamicSpec["computations"])) {
    for (const issue of undeclaredComputations(dynamicSpec["computations"], Object.keys(computations))) {
      ctx.addIssue({ code: "custom", path: ["dynamic_spec", ...issue.path], input: issue.name, message: issue.message });
    }
  }

  if (isPlainObject(streams)) {
    const owners = new Map<string, string>();
    for (const [name, stream] of Object.entries(streams)) {
      if (!isPlainObject(stream) || typeof stream["topic"] !== "string") continue;
      const owner = owners.get(stream["topic"]);
      if (owner === undefined) {
        owners.set(stream["topic"], name);
        continue;
      }
      ctx.addIssue({
        code: "custom",
        path: ["streams", name, "topic"],
        input: stream["topic"],
        message: `topic ${JSON.stringify(stream["topic"])} is already used by stream ${JSON.stringify(owner)}; ` + "two streams cannot share one topic",
      });
    }
  }
}

export type PipelineSpec = z.output<typeof pipelineSpecSchema>;
export type PipelineSpecInput = z.input<typeof pipelineSpecSchema>;
export type StreamSpec = z.output<typeof streamSpecSchema>;
export type StreamFormat = (typeof STREAM_FORMATS)[number];
export type DeliveryMode = (typeof DELIVERY_MODES)[number];
export type GeneratorSpec = z.output<typeof generatorSpecSchema>;
export type ComputationSpec = z.output<typeof computationSpecSchema>;
export type KafkaSpec = z.output<typeof kafkaSpecSchema>;
export type ControllerSpec = z.output<typeof controllerSpecSchema>;
export type ControllerTlsSpec = z.output<typeof controllerTlsSpecSchema>;
