import { systemClock } from "@sluice/core";
import type { QuotaServiceClient } from "@sluice/protocol";
import type { PipelineSpec } from "@sluice/spec";
import { consoleLogger, runGenerators, Worker, type ComputationStatsView, type IoFactory, type Logger } from "@sluice/runtime";
import type { Cli } from "./cli.ts";
import { StatusLine } from "./status-line.ts";

export interface SessionOptions {
  readonly spec: PipelineSpec;
  readonly specDir: string;
  readonly io: IoFactory;
  readonly quotaClient: () => QuotaServiceClient;
  readonly workerId?: string;
  readonly quiet: boolean;
  readonly cli: Cli;
  /** Resolves when the session should end by itself (e.g. --drain); otherwise it runs until a signal. */
  readonly finished?: (worker: Worker, generatorsDone: () => boolean) => Promise<void>;
  /** Runs on the way out, after the worker stopped (close the embedded controller, the gRPC client). */
  readonly cleanup?: () => Promise<void>;
  /**
   * Starts serving the worker's sensors (--metrics-port, --http-port) as soon as the worker exists,
   * so /metrics and /healthz answer while it still joins its groups; closed after the worker stopped.
   * A rejection (port in use) ends the session with exit code 1 before anything started.
   */
  readonly serve?: (worker: Worker) => Promise<{ close(): Promise<void> }>;
}

/**
 * What `sluice run` and `sluice worker` share: start the worker (and the spec's generators), show a
 * live status line in a terminal, stop cleanly on SIGINT/SIGTERM or when `finished` resolves, and
 * print a summary per computation.
 */
export async function runSession(options: SessionOptions): Promise<number> {
  const { spec, cli } = options;
  const log: Logger = consoleLogger(`sluice ${spec.pipeline}`);
  const worker = new Worker({
    pipeline: spec,
    specDir: options.specDir,
    io: options.io,
    quotaClient: options.quotaClient,
    ...(options.workerId ? { workerId: options.workerId } : {}),
    log,
  });
  let served: { close(): Promise<void> } | undefined;
  try {
    served = await options.serve?.(worker);
  } catch (error) {
    cli.stderr(`sluice: ${error instanceof Error ? error.message : String(error)}\n`);
    await worker.close();
    await options.cleanup?.();
    return 1;
  }
  const stop = new AbortController();
  const onSignal = (signal: NodeJS.Signals) => {
    log.info(`${signal}: stopping`);
    stop.abort();
  };
  process.once("SIGINT", onSignal);
  process.once("SIGTERM", onSignal);
  const startedAt = systemClock.now();
  let generatorsDone = false;
  const status = !options.quiet && process.stdout.isTTY ? new StatusLine(process.stdout, () => worker.stats()) : null;
  try {
    await worker.start();
    const generators = runGenerators({
      pipeline: spec,
      specDir: options.specDir,
      sink: options.io.createSink(spec),
      clock: systemClock,
      signal: stop.signal,
    }).then(() => (generatorsDone = true));
    generators.catch((error: unknown) => {
      log.error(`generator failed: ${error instanceof Error ? error.message : String(error)}`);
      stop.abort();
    });
    status?.start();
    const stopped = new Promise<void>((resolve) => stop.signal.addEventListener("abort", () => resolve(), { once: true }));
    await Promise.race([stopped, options.finished?.(worker, () => generatorsDone) ?? stopped]);
  } finally {
    stop.abort();
    status?.stop();
    process.off("SIGINT", onSignal);
    process.off("SIGTERM", onSignal);
    await worker.close();
    await served?.close();
    await options.cleanup?.();
  }
  const elapsedS = (systemClock.now() - startedAt) / 1000;
  for (const view of worker.stats()) cli.stdout(`${summary(view, elapsedS)}\n`);
  return 0;
}

function summary(view: ComputationStatsView, elapsedS: number): string {
  const rate = elapsedS > 0 ? view.rows / elapsedS : 0;
  return (
    `${view.computation}: processed ${view.rows} rows (${view.bytes} bytes) in ${elapsedS.toFixed(1)} s, ${rate.toFixed(0)} rows/s on average; ` +
    `throttle wait ${(view.throttleWaitMs / 1000).toFixed(1)} s; ${view.failures} failures`
  );
}
