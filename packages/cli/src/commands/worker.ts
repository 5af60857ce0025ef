import { createGrpcQuotaClient } from "@sluice/protocol";
import { EXIT_FAILURE, type CommandRegistration } from "../cli.ts";
import { createKafkaIo } from "../kafka-io.ts";
import { loadPipelineSpec } from "../load-spec.ts";
import { runSession } from "../pipeline-session.ts";

export const registerWorker: CommandRegistration = (program, cli) => {
  program
    .command("worker")
    .description("join the pipeline's Kafka consumer groups and run jobs, taking quota from the controller in the spec")
    .argument("<spec.json>", "pipeline spec file (needs kafka and controller.address)")
    .option("--quiet", "no live status line")
    .option("--worker-id <id>", "worker id in job ids and client ids (default: host-pid)")
    .option("--controller <host:port>", "controller address (overrides controller.address)")
    .action(async (specPath: string, options: { quiet?: boolean; workerId?: string; controller?: string }) => {
      const loaded = await loadPipelineSpec(specPath);
      if (!loaded.ok) {
        for (const issue of loaded.issues) cli.stderr(`✗ ${issue.path}: ${issue.message}\n`);
        cli.setExitCode(EXIT_FAILURE);
        return;
      }
      const { spec, specDir } = loaded;
      const address = options.controller ?? spec.controller?.address;
      const problems = [
        ...(spec.kafka ? [] : ["the spec has no kafka section: a worker shares streams with other workers through Kafka (use `sluice run` for in-memory streams)"]),
        ...(address ? [] : ["no controller: set controller.address in the spec or pass --controller host:port (start one with `sluice controller`)"]),
      ];
      if (problems.length > 0 || !address) {
        for (const problem of problems) cli.stderr(`✗ ${problem}\n`);
        cli.setExitCode(EXIT_FAILURE);
        return;
      }
      const client = createGrpcQuotaClient(address);
      const code = await runSession({
        spec,
        specDir,
        io: await createKafkaIo(spec),
        quotaClient: () => client,
        ...(options.workerId ? { workerId: options.workerId } : {}),
        quiet: options.quiet === true,
        cli,
        cleanup: async () => client.close(),
      });
      cli.setExitCode(code);
    });
};
