// Seed 003's PDF generator as a real HTTP service shared by every process of a test: it keeps the
// times of the calls it accepted and refuses (429) a call while 10 remain inside the last 1,000 ms
// (examples/correspondence/fake-pdf-generator.ts, the seed's rule), so a test sees what the
// protected system sees, when the calls land.
import { createServer, type Server } from "node:http";
import { FakePdfGenerator } from "../../examples/correspondence/fake-pdf-generator.ts";

export interface AcceptedCall {
  /** Epoch ms (sub-ms) at which the call was accepted. */
  readonly at: number;
  readonly id: string;
}

export class PdfService {
  readonly accepted: AcceptedCall[] = [];
  readonly refused: AcceptedCall[] = [];
  private readonly generator = new FakePdfGenerator();
  private readonly server: Server;

  /** Processes that asked for the go (`GET /go`): answered once `processes` of them have. */
  private readonly waitingForGo: (() => void)[] = [];

  private constructor(private readonly processes: number) {
    this.server = createServer((request, response) => {
      const url = new URL(request.url ?? "/", "http://x");
      if (url.pathname === "/go") {
        this.waitingForGo.push(() => response.writeHead(200).end("go"));
        if (this.waitingForGo.length >= this.processes) for (const go of this.waitingForGo.splice(0)) go();
        return;
      }
      const id = url.searchParams.get("id") ?? "";
      const at = performance.timeOrigin + performance.now();
      try {
        this.generator.generate(at);
        this.accepted.push({ at, id });
        response.writeHead(200).end("ok");
      } catch {
        this.refused.push({ at, id });
        response.writeHead(429).end("refused");
      }
    });
  }

  /** `processes`: how many must ask for the go (`GET /go`) before any is answered. */
  static async start(processes = 1): Promise<{ service: PdfService; url: string }> {
    const service = new PdfService(processes);
    await new Promise<void>((resolve) => service.server.listen(0, "127.0.0.1", resolve));
    const address = service.server.address();
    if (address === null || typeof address === "string") throw new Error("the PDF service has no port");
    return { service, url: `http://127.0.0.1:${address.port}` };
  }

  close(): Promise<void> {
    this.server.closeAllConnections();
    return new Promise((resolve) => this.server.close(() => resolve()));
  }
}
