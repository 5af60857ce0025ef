import { isSluiceError, systemClock } from "@sluice/core";
import type { ControllerSnapshot } from "@sluice/controller";
import type { LeaderFollowingClient, QuotaServiceClient } from "@sluice/protocol";
import { controllerClient, parseControllerList } from "../controller-client.ts";
import { EXIT_FAILURE, EXIT_OK, type Cli } from "../cli.ts";
import { formatTopFrame } from "../top-frame.ts";
import { partLines, readPartSums, type PartSums, type PartsReading } from "../top-parts.ts";
import { loadClientTls, type ClientTlsFlags } from "../tls-options.ts";
import { CONTROLLER_TOKEN_ENV } from "./controller.ts";

export interface TopOptions extends ClientTlsFlags {
  readonly controller: string;
  readonly interval: number;
  readonly once?: boolean;
  readonly token?: string;
  /** Workers' /metrics URLs: each computation's epoch parts. */
  readonly metrics?: readonly string[];
  /** Only this throttler; with `key`, that key of a keyed throttler as well (DescribeThrottlers' filter). */
  readonly throttler?: string;
  readonly key?: string;
}

/** DescribeThrottlers answers at once; a controller that does not within this is reported as unreachable. */
const DESCRIBE_DEADLINE_MS = 5_000;

// Terminal control: the alternate screen keeps the user's scrollback intact (as top and htop do).
const ENTER_SCREEN = "\x1b[?1049h\x1b[?25l";
const LEAVE_SCREEN = "\x1b[?25h\x1b[?1049l";
const HOME = "\x1b[H";
const CLEAR_LINE_END = "\x1b[K";
const CLEAR_BELOW = "\x1b[J";

export async function topAction(cli: Cli, options: TopOptions): Promise<void> {
  if (options.key !== undefined && options.throttler === undefined) {
    cli.stderr("sluice top: --key names a key of a keyed throttler: give that throttler with --throttler <id>\n");
    cli.setExitCode(EXIT_FAILURE);
    return;
  }
  let tls: Awaited<ReturnType<typeof loadClientTls>>;
  try {
    tls = await loadClientTls(options);
  } catch (error) {
    cli.stderr(`sluice top: ${error instanceof Error ? error.message : String(error)}\n`);
    cli.setExitCode(EXIT_FAILURE);
    return;
  }
  const token = options.token ?? (process.env[CONTROLLER_TOKEN_ENV] || undefined);
  const client = controllerClient(parseControllerList(options.controller), {
    ...(token !== undefined ? { token } : {}),
    ...(tls !== undefined ? { tls } : {}),
  });
  const terminal = process.stdout.isTTY === true;
  const color = terminal && !process.env["NO_COLOR"];
  const columns = process.stdout.columns ?? 120;
  try {
    if (options.once) {
      const [snapshot, parts] = await Promise.all([describe(client, options), readParts(options)]);
      const computationLines = parts ? partLines(parts, undefined, dimmer(color)) : undefined;
      cli.stdout(
        `${formatTopFrame({ address: client.currentAddress, snapshot, intervalMs: options.interval, color, columns, ...(computationLines ? { computationLines } : {}) }).join("\n")}\n`,
      );
      cli.setExitCode(EXIT_OK);
      return;
    }
    await watch(client, options, terminal, color, (text) => cli.stdout(text));
    cli.setExitCode(EXIT_OK);
  } catch (error) {
    cli.stderr(`sluice top: ${unreachable(error, options.controller)}\n`);
    cli.setExitCode(EXIT_FAILURE);
  } finally {
    client.close();
  }
}

/** Redraws every interval until Ctrl-C (SIGINT) or SIGTERM; a failed refresh keeps the last picture with the error. */
async function watch(client: LeaderFollowingClient, options: TopOptions, terminal: boolean, color: boolean, write: (text: string) => void): Promise<void> {
  const stop = new AbortController();
  const onSignal = () => stop.abort();
  process.once("SIGINT", onSignal);
  process.once("SIGTERM", onSignal);
  // The first answer decides whether there is anything to watch: a wrong address fails at once.
  let snapshot = await describe(client, options);
  let previous: ControllerSnapshot | undefined;
  let error: string | undefined;
  let parts = await readParts(options);
  let previousParts: PartSums | undefined;
  if (terminal) write(ENTER_SCREEN);
  try {
    while (!stop.signal.aborted) {
      const lines = formatTopFrame({
        address: client.currentAddress,
        snapshot,
        ...(previous ? { previous } : {}),
        intervalMs: options.interval,
        ...(error ? { error } : {}),
        color,
        columns: process.stdout.columns ?? 120,
        ...(parts ? { computationLines: partLines(parts, previousParts, dimmer(color)) } : {}),
      });
      // In place: home, each line over the old one, clear what the old picture had below.
      write(terminal ? `${HOME}${lines.map((line) => `${line}${CLEAR_LINE_END}`).join("\n")}\n${CLEAR_BELOW}` : `${lines.join("\n")}\n\n`);
      await sleep(options.interval, stop.signal);
      if (stop.signal.aborted) break;
      try {
        const [next, nextParts] = await Promise.all([describe(client, options, stop.signal), readParts(options)]); // Ctrl-C does not wait for a slow answer
        previous = snapshot;
        snapshot = next;
        error = undefined;
        // From the second reading on, the shares are those of the last interval.
        if (nextParts) {
          previousParts = parts?.sums;
          parts = nextParts;
        }
      } catch (thrown) {
        if (stop.signal.aborted) break;
        error = unreachable(thrown, options.controller);
      }
    }
  } finally {
    process.off("SIGINT", onSignal);
    process.off("SIGTERM", onSignal);
    if (terminal) write(LEAVE_SCREEN);
  }
}

async function describe(client: QuotaServiceClient, options: TopOptions, signal?: AbortSignal): Promise<ControllerSnapshot> {
  const filter = { ...(options.throttler !== undefined ? { throttlerId: options.throttler } : {}), ...(options.key !== undefined ? { key: options.key } : {}) };
  const { snapshotJson } = await client.describeThrottlers({ deadlineAt: systemClock.now() + DESCRIBE_DEADLINE_MS, ...(signal ? { signal } : {}) }, filter);
  const parsed = JSON.parse(snapshotJson) as ControllerSnapshot;
  if (!Array.isArray(parsed.throttlers)) throw new Error(`DescribeThrottlers answered without a throttler list: ${snapshotJson.slice(0, 200)}`);
  return parsed;
}

function unreachable(error: unknown, address: string): string {
  if (isSluiceError(error) && (error.code === "CONTROLLER_UNAVAILABLE" || error.code === "QUOTA_TIMEOUT")) {
    return `${error.text}; is \`sluice controller\` (or \`sluice run --controller-port\`) serving ${address}?`;
  }
  return error instanceof Error ? error.message : String(error);
}

function sleep(ms: number, signal: AbortSignal): Promise<void> {
  return new Promise((resolve) => {
    const timer = setTimeout(done, ms);
    function done() {
      clearTimeout(timer);
      signal.removeEventListener("abort", done);
      resolve();
    }
    signal.addEventListener("abort", done, { once: true });
  });
}

/** The workers' part sums, or undefined without --metrics. */
function readParts(options: TopOptions): Promise<PartsReading | undefined> {
  return options.metrics && options.metrics.length > 0 ? readPartSums(options.metrics) : Promise.resolve(undefined);
}

function dimmer(color: boolean): (text: string) => string {
  return (text) => (color ? `\x1b[2m${text}\x1b[22m` : text);
}
