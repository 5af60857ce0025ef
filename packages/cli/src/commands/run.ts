import type { Tracer } from "@opentelemetry/api";
import { systemClock } from "@sluice/core";
import { Controller, startController, type RunningController } from "@sluice/controller";
import { createGrpcQuotaClient, createInMemoryQuotaClient, type QuotaServiceClient } from "@sluice/protocol";
import type { PipelineSpec } from "@sluice/spec";
import { MemoryIoFactory, type IoFactory, type Worker } from "@sluice/runtime";
import { EXIT_FAILURE, type CommandRegistration } from "../cli.ts";
import { createKafkaIo } from "../kafka-io.ts";
import { loadPipelineSpec } from "../load-spec.ts";
import { runSession } from "../pipeline-session.ts";
import { DEFAULT_HTTP_HOST, parseHttpPort, serveRunStatus } from "../status-endpoints.ts";
import { runServices } from "../traced-services.ts";
import { OTLP_OPTION_DESCRIPTION, parseOtlpUrl, startTracing } from "../tracing.ts";

interface RunOptions {
  readonly quiet?: boolean;
  readonly drain?: boolean;
  readonly controllerPort?: string;
  readonly workerId?: string;
  readonly otlp?: string;
  readonly httpPort?: number;
  readonly httpHost: string;
}

export const registerRun: CommandRegistration = (program, cli) => {
  program
    .command("run")
    .description(
      "run a whole pipeline in one process: an embedded controller unless the spec names controller.address, " +
        "in-memory streams unless it has a kafka section",
    )
    .argument("<spec.json>", "pipeline spec file")
    .option("--quiet", "no live status line")
    .option("--drain", "exit once the generators finished and every input is processed (in-memory streams only)")
    .option("--controller-port <port>", "also serve the embedded controller over gRPC on 127.0.0.1:<port>, for `sluice reconfigure` and `sluice top`")
    .option("--worker-id <id>", "worker id in job ids and client ids (default: host-pid)")
    .option(
      "--http-port <port>",
      "serve the embedded controller's live dashboard (/) and /api/snapshot, Prometheus /metrics of the controller and the worker, and /healthz on one HTTP port; 0 picks a free port",
      parseHttpPort,
    )
    .option("--http-host <host>", "interface of the --http-port server", DEFAULT_HTTP_HOST)
    .option("--otlp <url>", OTLP_OPTION_DESCRIPTION, parseOtlpUrl)
    .action(async (specPath: string, options: RunOptions) => {
      const loaded = await loadPipelineSpec(specPath);
      if (!loaded.ok) {
        for (const issue of loaded.issues) cli.stderr(`✗ ${issue.path}: ${issue.message}\n`);
        cli.setExitCode(EXIT_FAILURE);
        return;
      }
      const { spec, specDir } = loaded;
      if (options.drain && spec.kafka) {
        cli.stderr("--drain works with in-memory streams only: a Kafka topic has no end\n");
        cli.setExitCode(EXIT_FAILURE);
        return;
      }
      // Before anything that makes spans; the embedded controller's spans go to a tracer of its own.
      const tracing = await startTracing({ ...(options.otlp ? { otlp: options.otlp } : {}), ...runServices(spec, options.workerId) });
      if (tracing.enabled) cli.stdout(`sluice run: ${tracing.description}\n`);
      const quota = await connectQuota(spec, specDir, options, (line) => cli.stdout(`${line}\n`), tracing.embeddedTracer);
      const io: IoFactory = spec.kafka ? await createKafkaIo(spec) : new MemoryIoFactory(spec);
      const code = await runSession({
        spec,
        specDir,
        io,
        quotaClient: () => quota.client,
        ...(options.workerId ? { workerId: options.workerId } : {}),
        quiet: options.quiet === true,
        cli,
        ...(options.httpPort !== undefined
          ? {
              serve: (worker) =>
                serveRunStatus(quota.controller, worker, spec.pipeline, { host: options.httpHost, port: options.httpPort ?? 0 }, (line) =>
                  cli.stdout(`sluice run: ${line}\n`),
                ),
            }
          : {}),
        ...(options.drain && io instanceof MemoryIoFactory ? { finished: (worker, generatorsDone) => drained(worker, generatorsDone, io, spec) } : {}),
        cleanup: quota.close,
        // After the summary: an unreachable collector may hold the exit for SHUTDOWN_TIMEOUT_MS.
      }).finally(() => tracing.shutdown());
      cli.setExitCode(code);
    });
};

/** The embedded controller (optionally also served over gRPC), or a connection to the spec's controller. */
async function connectQuota(
  spec: PipelineSpec,
  specDir: string,
  options: RunOptions,
  log: (line: string) => void,
  tracer: Tracer | undefined,
): Promise<{ client: QuotaServiceClient; controller: Controller | null; close: () => Promise<void> }> {
  const address = spec.controller?.address;
  if (address) {
    const client = createGrpcQuotaClient(address);
    return { client, controller: null, close: async () => client.close() };
  }
  let served: RunningController | null = null;
  let controller: Controller;
  if (options.controllerPort !== undefined) {
    served = await startController({ spec, baseDir: specDir, port: Number(options.controllerPort), log, ...(tracer ? { tracer } : {}) });
    controller = served.controller;
    log(`sluice run: embedded controller listening on ${served.address}`);
  } else {
    controller = new Controller({
      dynamicSpec: spec.dynamic_spec,
      computations: Object.keys(spec.computations),
      clock: systemClock,
      log,
      baseDir: specDir,
      ...(tracer ? { tracer } : {}),
    });
  }
  const client = createInMemoryQuotaClient(controller);
  return {
    client,
    controller,
    close: async () => {
      client.close();
      if (served) await served.close();
      else controller.close();
    },
  };
}

/** Resolves when generators are done and every computation committed to the end of its inputs. */
async function drained(worker: Worker, generatorsDone: () => boolean, io: MemoryIoFactory, spec: PipelineSpec): Promise<void> {
  let quietChecks = 0;
  for (;;) {
    await systemClock.sleep(100);
    const caughtUp = Object.entries(spec.computations).every(([name, computation]) =>
      computation.inputs.every((stream) =>
        Array.from({ length: io.log.partitionCount(stream) }, (_, p) => p).every(
          (p) => io.log.committedOffset(`${spec.pipeline}.${name}`, stream, p) === io.log.endOffset(stream, p),
        ),
      ),
    );
    // Two checks in a row, so a computation fed by another one has seen its last outputs too.
    quietChecks = generatorsDone() && caughtUp && worker.stats().length > 0 ? quietChecks + 1 : 0;
    if (quietChecks >= 2) return;
  }
}
