import type { Sink, SinkRecord } from "../ports/sink.ts";
import type { MemoryLog } from "./memory-log.ts";

/** Appends to the memory log; an append is its own acknowledgement. */
export class MemorySink implements Sink {
  constructor(private readonly log: MemoryLog) {}

  async send(stream: string, records: readonly SinkRecord[]): Promise<void> {
    for (const record of records) this.log.append(stream, record);
  }

  async close(): Promise<void> {}
}
