import type { PipelineSpec, StreamSpec } from "@sluice/spec";
import { KafkaIoError } from "./kafka-io-error.ts";

export interface StreamTopic {
  readonly stream: string;
  readonly topic: string;
  /** Declared partition count (`streams.<name>.partitions`); the topic itself may differ. */
  readonly partitions: number;
}

/**
 * Stream name ↔ topic of a pipeline. The spec guarantees one stream per topic, so the map is a
 * bijection; the runtime speaks streams, Kafka speaks topics.
 */
export class StreamTopics {
  private readonly byStream = new Map<string, StreamTopic>();
  private readonly byTopic = new Map<string, StreamTopic>();

  constructor(
    private readonly pipeline: string,
    streams: Readonly<Record<string, StreamSpec>>,
  ) {
    for (const [stream, spec] of Object.entries(streams)) {
      const entry: StreamTopic = { stream, topic: spec.topic, partitions: spec.partitions };
      this.byStream.set(stream, entry);
      this.byTopic.set(spec.topic, entry);
    }
  }

  static of(spec: PipelineSpec): StreamTopics {
    return new StreamTopics(spec.pipeline, spec.streams);
  }

  /** The streams a computation reads, with their topics. */
  static inputsOf(spec: PipelineSpec, computation: string, inputs?: readonly string[]): StreamTopic[] {
    const streams = StreamTopics.of(spec);
    const names = inputs ?? spec.computations[computation]?.inputs;
    if (names === undefined) {
      throw new KafkaIoError(
        "KAFKA_SPEC_INVALID",
        `pipeline "${spec.pipeline}" has no computation "${computation}" (computations: ${quoted(Object.keys(spec.computations))})`,
        { pipeline: spec.pipeline, computation },
      );
    }
    return names.map((name) => streams.stream(name, `computations.${computation}.inputs`));
  }

  stream(name: string, where: string): StreamTopic {
    const entry = this.byStream.get(name);
    if (entry) return entry;
    throw new KafkaIoError(
      "KAFKA_SPEC_INVALID",
      `${where}: stream "${name}" is not declared in pipeline "${this.pipeline}" (streams: ${quoted([...this.byStream.keys()])})`,
      { pipeline: this.pipeline, stream: name },
    );
  }

  byTopicName(topic: string): StreamTopic | undefined {
    return this.byTopic.get(topic);
  }

  all(): StreamTopic[] {
    return [...this.byStream.values()];
  }
}

function quoted(names: readonly string[]): string {
  return names.length === 0 ? "none" : names.map((n) => `"${n}"`).join(", ");
}
