import { SluiceError } from "@sluice/core";
import type { PipelineSpec } from "@sluice/spec";
import type { OutputMessage } from "../computation.ts";
import { encodeHeaders, encodeText, encodeValue } from "../io/stream-codec.ts";
import type { Sink, SinkRecord } from "../ports/sink.ts";

/**
 * What a job's computation emitted during one iteration, by output stream, until Output sends it
 * (docs/design.md §3): only to the streams the computation declares, encoded in each stream's format.
 */
export class JobOutputs {
  private readonly buffers = new Map<string, OutputMessage[]>();
  private readonly declared: readonly string[];

  constructor(
    private readonly pipeline: PipelineSpec,
    private readonly computationName: string,
  ) {
    this.declared = pipeline.computations[computationName]?.outputs ?? [];
  }

  get size(): number {
    return this.buffers.size;
  }

  /** The computation's `emit`: refuses a stream that is not among its outputs, with the fix. */
  emit(stream: string, message: OutputMessage): void {
    if (!this.declared.includes(stream)) {
      throw new SluiceError(
        "SPEC_INVALID",
        `computation "${this.computationName}" emitted to stream "${stream}", which is not among its outputs ` +
          `(${this.declared.length > 0 ? this.declared.map((s) => `"${s}"`).join(", ") : "none"}); add it to computations.${this.computationName}.outputs`,
      );
    }
    let buffer = this.buffers.get(stream);
    if (!buffer) {
      buffer = [];
      this.buffers.set(stream, buffer);
    }
    buffer.push(message);
  }

  clear(): void {
    this.buffers.clear();
  }

  /** Sends everything buffered to `target` (the sink, or a transaction) and waits for every stream's acknowledgement. */
  async flush(target: Pick<Sink, "send">): Promise<void> {
    const sends: Promise<void>[] = [];
    for (const [stream, messages] of this.buffers) {
      const format = this.pipeline.streams[stream]?.format ?? "json";
      const where = `computation "${this.computationName}" output to stream "${stream}"`;
      const records = messages.map(
        (m): SinkRecord => ({
          key: encodeText(m.key),
          value: encodeValue(format, m.value, where),
          ...(m.headers ? { headers: encodeHeaders(m.headers) ?? {} } : {}),
          ...(m.partition !== undefined ? { partition: m.partition } : {}),
          ...(m.timestampMs !== undefined ? { timestampMs: m.timestampMs } : {}),
        }),
      );
      sends.push(target.send(stream, records));
    }
    this.buffers.clear();
    await Promise.all(sends);
  }
}
