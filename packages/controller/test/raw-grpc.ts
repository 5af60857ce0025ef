import { connect, type ClientHttp2Session } from "node:http2";
import { CALLER_TIMEOUT_METADATA_KEY } from "@sluice/protocol";

/** What a raw gRPC call came back with: the status, the Sluice code from the trailers, the message. */
export interface RawOutcome {
  readonly status: number;
  readonly code: string | undefined;
  readonly message: string;
  /** The response message's bytes (status 0 only). */
  readonly body: Buffer;
}

/**
 * A gRPC client without grpc-js: any bytes as the request message, so a test can send what no
 * generated client would (a message that does not decode, strings that are not UTF-8). Calls
 * carry the caller's deadline the way the Sluice client does (call-deadline.ts).
 */
export class RawGrpc {
  private readonly session: ClientHttp2Session;

  constructor(address: string) {
    // Node's default (10 MB) refuses new streams once a hundred megabyte messages are in flight.
    this.session = connect(`http://${address}`, { maxSessionMemory: 1_000 });
    this.session.on("error", () => {
      /* a call's own promise reports what it saw */
    });
  }

  call(method: string, message: Buffer, deadlineMs?: number): Promise<RawOutcome> {
    return new Promise<RawOutcome>((resolve, reject) => {
      const stream = this.session.request({
        ":method": "POST",
        ":path": `/sluice.throttler.v1.QuotaService/${method}`,
        "content-type": "application/grpc",
        te: "trailers",
        // The transport's own timeout only backs up the caller's deadline (the Sluice metadata, which
        // is what the controller answers by): far enough past it that a controller slowed by a loaded
        // machine still gets to answer with its own code.
        ...(deadlineMs !== undefined ? { "grpc-timeout": `${deadlineMs + 60_000}m`, [CALLER_TIMEOUT_METADATA_KEY]: String(deadlineMs) } : {}),
      });
      const headers: Record<string, unknown> = {};
      const chunks: Buffer[] = [];
      const take = (more: Record<string, unknown>) => Object.assign(headers, more);
      stream.on("response", take);
      stream.on("trailers", take);
      stream.on("data", (chunk: Buffer) => chunks.push(chunk));
      stream.on("error", reject);
      stream.on("close", () => {
        const status = headers["grpc-status"];
        if (status === undefined) {
          reject(new Error(`${method}: the stream closed without a grpc-status (rst code ${stream.rstCode})`));
          return;
        }
        const code = headers["sluice-error-code"];
        const message = typeof headers["grpc-message"] === "string" ? decodeURIComponent(headers["grpc-message"]) : "";
        const frames = Buffer.concat(chunks);
        resolve({ status: Number(status), code: typeof code === "string" ? code : undefined, message, body: frames.subarray(5) });
      });
      const frame = Buffer.alloc(5 + message.length);
      frame.writeUInt32BE(message.length, 1);
      message.copy(frame, 5);
      stream.end(frame);
    });
  }

  close(): void {
    this.session.close();
  }
}

/** A length-delimited protobuf field holding `bytes` as they are. */
export function bytesField(fieldNumber: number, bytes: Buffer): Buffer {
  const length: number[] = [];
  for (let n = bytes.length; ; n = Math.floor(n / 128)) {
    if (n < 128) {
      length.push(n);
      break;
    }
    length.push((n % 128) | 0x80);
  }
  return Buffer.concat([Buffer.from([(fieldNumber << 3) | 2, ...length]), bytes]);
}
