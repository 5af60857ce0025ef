import { parseDuration } from "@sluice/spec";
import { InvalidArgumentError, Option } from "commander";
import type { CommandRegistration } from "../cli.ts";
import { CLIENT_TLS_OPTIONS } from "../command-options.ts";
import { CONTROLLER_TOKEN_ENV } from "./controller.ts";
import type { TopOptions } from "./top-action.ts";

export const registerTop: CommandRegistration = (program, cli) => {
  program
    .command("top")
    .description("watch a running controller's throttlers in the terminal: limit, granted rate, queue, wait, class shares")
    .requiredOption("--controller <host:port>", "address of the controller (`sluice controller --port`, or `sluice run --controller-port`)")
    .addOption(new Option("--interval <duration>", 'refresh period, e.g. "2s", "500ms"').argParser(parseInterval).default(1000, "1s"))
    .option("--once", "print one picture and exit (for scripts and logs)")
    .option(
      "--metrics <url...>",
      "workers' /metrics URLs (`sluice run --http-port`, `sluice worker --metrics-port`), e.g. http://127.0.0.1:9464/metrics: adds each computation's share of iteration time per part (throttle · process · output · commit)",
      parseMetricsUrl,
    )
    .option("--throttler <id>", "show only this throttler")
    .option("--key <key>", "with --throttler of a keyed throttler: also that key's own figures (its bucket or parked balance, limit, waits)")
    .option("--token <token>", `controller token (default: $${CONTROLLER_TOKEN_ENV})`)
    .option(...CLIENT_TLS_OPTIONS.ca)
    .option(...CLIENT_TLS_OPTIONS.cert)
    .option(...CLIENT_TLS_OPTIONS.key)
    .option(...CLIENT_TLS_OPTIONS.serverName)
    .action(async (options: TopOptions) => {
      const { topAction } = await import("./top-action.ts");
      await topAction(cli, options);
    });
};

function parseInterval(value: string): number {
  let ms: number;
  try {
    ms = parseDuration(/^\d+$/.test(value) ? Number(value) : value);
  } catch (error) {
    throw new InvalidArgumentError(error instanceof Error ? error.message : String(error));
  }
  if (ms < 100) throw new InvalidArgumentError(`--interval must be at least 100ms, got "${value}"`);
  return ms;
}

/** commander parser of each `--metrics <url>` value: an http(s) URL, `/metrics` added when it has no path. */
function parseMetricsUrl(value: string, previous: readonly string[] | undefined): string[] {
  let url: URL;
  try {
    url = new URL(value);
  } catch {
    throw new InvalidArgumentError(`a worker's metrics endpoint is an http(s) URL such as http://127.0.0.1:9464/metrics, got "${value}"`);
  }
  if (url.protocol !== "http:" && url.protocol !== "https:") throw new InvalidArgumentError(`a worker's metrics endpoint is an http(s) URL, got "${value}"`);
  if (url.pathname === "/") url.pathname = "/metrics";
  return [...(previous ?? []), url.toString()];
}
