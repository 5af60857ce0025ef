// Seed 003's PDF generator as a real HTTP service shared by every process of a test: it keeps the
// times of the calls it accepted and refuses (429) a call while 10 remain inside the last 1,000 ms
// (the seed's rule, examples/correspondence/fake-pdf-generator.ts), so a test sees what the
// protected system sees, when the calls land. The server runs in a worker thread
// (pdf-service-worker.mjs) so that the test process's own work does not move the arrival times.
import { Worker } from "node:worker_threads";

export interface AcceptedCall {
  /** Epoch ms (sub-ms) at which the call was accepted. */
  readonly at: number;
  readonly id: string;
  /** When the calling process made the call (epoch ms, its clock): `at − handedAt` is the dispatch delay. */
  readonly handedAt: number;
}

export class PdfService {
  readonly accepted: AcceptedCall[] = [];
  readonly refused: AcceptedCall[] = [];
  /** When the generator's own thread was not running (from `at`, for `ms`): it saw no call then. */
  readonly stalls: { at: number; ms: number }[] = [];

  private constructor(private readonly worker: Worker) {
    worker.on("message", (message: { accepted?: AcceptedCall; refused?: AcceptedCall; stall?: { at: number; ms: number } }) => {
      if (message.accepted) this.accepted.push(message.accepted);
      if (message.refused) this.refused.push(message.refused);
      if (message.stall) this.stalls.push(message.stall);
    });
  }

  /**
   * `processes`: how many must ask for the go (`GET /go`) before any is answered. `nice`: the
   * priority of the generator's thread, where the system allows it.
   */
  static async start(processes = 1, nice?: number): Promise<{ service: PdfService; url: string }> {
    const workerData = { processes, ...(nice === undefined ? {} : { nice }) };
    const worker = new Worker(new URL("./pdf-service-worker.mjs", import.meta.url), { workerData });
    const service = new PdfService(worker);
    const port = await new Promise<number>((resolve, reject) => {
      worker.once("error", reject);
      const onPort = (message: { port?: number }) => {
        if (message.port === undefined) return;
        worker.off("message", onPort);
        resolve(message.port);
      };
      worker.on("message", onPort);
    });
    return { service, url: `http://127.0.0.1:${port}` };
  }

  /** Resolves once every call the server saw so far is in `accepted` or `refused`. */
  flush(): Promise<void> {
    return new Promise((resolve) => {
      const onFlushed = (message: { flushed?: boolean }) => {
        if (!message.flushed) return;
        this.worker.off("message", onFlushed);
        resolve();
      };
      this.worker.on("message", onFlushed);
      this.worker.postMessage("flush");
    });
  }

  /** Stops the server; the calls seen so far stay in `accepted` and `refused`. */
  async close(): Promise<void> {
    const exited = new Promise<void>((resolve) => this.worker.once("exit", () => resolve()));
    this.worker.postMessage("close");
    // unref: a timer left pending would keep the test's process alive for the rest of its 5 s.
    await Promise.race([exited, new Promise<void>((resolve) => setTimeout(resolve, 5_000).unref())]);
    await this.worker.terminate();
  }
}
