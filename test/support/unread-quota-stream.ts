import { connect, type ClientHttp2Session, type ClientHttp2Stream } from "node:http2";
import { quotaServiceDefinition } from "@sluice/protocol";

// A hostile QuotaStream client without grpc-js (docs/design.md §5.3): it writes calls as fast as its socket
// takes them and reads no answers, so the controller's only defence is its own backpressure and
// its bound on open calls. `startReading()` turns it into a reader, to see what was held back.

type ClientFrame = Parameters<ReturnType<typeof quotaServiceDefinition>["QuotaStream"]["requestSerialize"]>[0];
type ServerFrame = ReturnType<ReturnType<typeof quotaServiceDefinition>["QuotaStream"]["responseDeserialize"]>;

export interface UnreadQuotaStreams {
  /** Frames the client asked its HTTP/2 streams to write (the socket may not have taken them all). */
  readonly framesWritten: number;
  /** Starts reading every stream; answers are counted (and decoded) from then on. */
  startReading(): void;
  /** Answers read so far, once reading. */
  readonly answersRead: number;
  /** Answers read so far with a Sluice error code, by code. */
  readonly errorsRead: ReadonlyMap<string, number>;
  /** The figures (details JSON) of the first answer read with each error code. */
  readonly firstErrorDetails: ReadonlyMap<string, string>;
  close(): void;
}

/** A watch call per call id: the answer of each carries the whole dynamic_spec. */
export function watchCalls(from: number, count: number, clientId = "hostile"): ClientFrame["calls"] {
  return Array.from({ length: count }, (_, i) => ({ callId: from + i, timeoutMs: 0, metadata: {}, watchDynamicSpec: { clientId } }));
}

/**
 * Opens `streams` QuotaStreams on one HTTP/2 connection to `address` and writes `callsPerStream`
 * calls on each (made by `callsOf`), `perFrame` calls a frame, never reading what comes back.
 */
export function unreadQuotaStreams(
  address: string,
  options: { streams: number; callsPerStream: number; perFrame: number; callsOf?: (from: number, count: number) => ClientFrame["calls"]; token?: string },
): UnreadQuotaStreams {
  const method = quotaServiceDefinition().QuotaStream;
  const callsOf = options.callsOf ?? watchCalls;
  // Node's default maxSessionMemory (10 MB) would refuse new streams once the unsent frames pile up.
  const session: ClientHttp2Session = connect(`http://${address}`, { maxSessionMemory: 10_000 });
  session.on("error", () => {
    /* the test sees the outcome through the controller it watches */
  });
  const opened: ClientHttp2Stream[] = [];
  let framesWritten = 0;
  let answersRead = 0;
  const errorsRead = new Map<string, number>();
  const firstErrorDetails = new Map<string, string>();
  for (let s = 0; s < options.streams; s++) {
    const stream = session.request({
      ":method": "POST",
      ":path": method.path,
      "content-type": "application/grpc",
      te: "trailers",
      ...(options.token !== undefined ? { authorization: `Bearer ${options.token}` } : {}),
    });
    stream.on("error", () => {});
    stream.pause();
    opened.push(stream);
    for (let from = 1; from <= options.callsPerStream; from += options.perFrame) {
      const count = Math.min(options.perFrame, options.callsPerStream - from + 1);
      const message = method.requestSerialize({ calls: callsOf(from, count) });
      const frame = Buffer.alloc(5 + message.length);
      frame.writeUInt32BE(message.length, 1);
      message.copy(frame, 5);
      stream.write(frame);
      framesWritten += 1;
    }
  }
  return {
    get framesWritten() {
      return framesWritten;
    },
    get answersRead() {
      return answersRead;
    },
    errorsRead,
    firstErrorDetails,
    startReading() {
      for (const stream of opened) {
        let buffered = Buffer.alloc(0);
        stream.on("data", (chunk: Buffer) => {
          buffered = Buffer.concat([buffered, chunk]);
          while (buffered.length >= 5 && buffered.length >= 5 + buffered.readUInt32BE(1)) {
            const length = buffered.readUInt32BE(1);
            const frame: ServerFrame = method.responseDeserialize(buffered.subarray(5, 5 + length));
            buffered = buffered.subarray(5 + length);
            for (const answer of frame.answers) {
              answersRead += 1;
              const code = answer.error?.sluiceErrorCode;
              if (code) {
                errorsRead.set(code, (errorsRead.get(code) ?? 0) + 1);
                if (!firstErrorDetails.has(code)) firstErrorDetails.set(code, answer.error?.detailsJson ?? "");
              }
            }
          }
        });
        stream.resume();
      }
    },
    close() {
      for (const stream of opened) stream.close();
      session.close();
      session.destroy();
    },
  };
}
