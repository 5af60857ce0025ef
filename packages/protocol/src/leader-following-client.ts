import type { ChannelOptions } from "@grpc/grpc-js";
import { asSluiceError, SluiceError } from "@sluice/core";
import { leaderOf } from "./error-mapping.ts";
import { REPORT_WATERMARKS_UNIMPLEMENTED, type CallOptions, type DescribeThrottlersFilter, type QuotaServiceClient } from "./quota-service.ts";

/**
 * Channel options for the connections of a failover group's client: a leader that is paused
 * (SIGSTOP, a frozen VM) keeps its connections open but answers nothing, so without pings a call or
 * a dynamic_spec watch waits on it until its own deadline (rpc_timeout, 30 s by default). With a
 * ping every 5 s that must be answered within 5 s, a silent connection fails within 10 s and the
 * call moves to the next controller. (The grpc-js server answers pings without limiting them.)
 */
export const FAILOVER_CHANNEL_OPTIONS: ChannelOptions = {
  "grpc.keepalive_time_ms": 5_000,
  "grpc.keepalive_timeout_ms": 5_000,
};

export interface LeaderFollowingClientOptions {
  /** Opens one connection (the token and TLS options of the caller live here). */
  readonly connect: (address: string) => QuotaServiceClient;
  /** One line when the client moves to another controller. */
  readonly log?: (line: string) => void;
}

/** Raised when a connection's client has no RenewLeases (a test double written before concurrency throttlers). */
function noRenewLeases(): SluiceError {
  return new SluiceError("CONTROLLER_UNAVAILABLE", "this controller client does not implement RenewLeases (concurrency throttlers)");
}

/** A QuotaServiceClient that also says which controller it talks to now. */
export interface LeaderFollowingClient extends QuotaServiceClient {
  readonly currentAddress: string;
}

/**
 * A client of a failover group of controllers (docs/design.md §5.2): every call goes to the controller it
 * believes leads. A refusal that names the leader (trailer `sluice-leader`) sends the call there at
 * once; an unreachable controller, or one that knows no leader, sends it to the next address. One
 * call visits each controller at most once; when none answered, the last error goes back to the
 * caller, whose retrying channel backs off and retries under the SAME request id — so a request is
 * still granted once, whichever controller grants it.
 *
 * A deadline passed while waiting (QUOTA_TIMEOUT) also moves on when there are other controllers:
 * a paused leader accepts connections but answers nothing; a live one is reached again through
 * the followers' redirect, and the request resumes its place there.
 */
export function createLeaderFollowingClient(addresses: readonly string[], options: LeaderFollowingClientOptions): LeaderFollowingClient {
  if (addresses.length === 0) throw new SluiceError("SPEC_INVALID", "a controller client needs at least one controller address");
  const known = [...new Set(addresses)];
  const clients = new Map<string, QuotaServiceClient>();
  let current = known[0] ?? "";
  let closed = false;

  const clientFor = (address: string): QuotaServiceClient => {
    let client = clients.get(address);
    if (!client) {
      client = options.connect(address);
      clients.set(address, client);
    }
    return client;
  };

  const moveTo = (address: string, why: string) => {
    if (address === current) return;
    if (!known.includes(address)) known.push(address); // a leader the spec did not list (e.g. advertised)
    options.log?.(`controller ${current} ${why}; now using ${address}`);
    current = address;
  };

  const next = (after: string): string => known[(known.indexOf(after) + 1) % known.length] ?? after;

  /** Whether an error from one controller is worth trying another for. */
  const movable = (error: SluiceError): boolean => error.code === "CONTROLLER_UNAVAILABLE" || (error.code === "QUOTA_TIMEOUT" && known.length > 1);

  async function call<T>(method: string, run: (client: QuotaServiceClient) => Promise<T>, signal?: AbortSignal): Promise<T> {
    const tried = new Set<string>();
    let lastError: SluiceError | undefined;
    while (!closed) {
      const address = current;
      tried.add(address);
      try {
        return await run(clientFor(address));
      } catch (thrown) {
        const error = asSluiceError(thrown, (message) => new SluiceError("CONTROLLER_UNAVAILABLE", message));
        if (signal?.aborted || !movable(error)) throw error;
        lastError = error;
        const leader = leaderOf(error);
        // A controller naming itself has just been elected and is reading its state: stay with it,
        // and let the caller's backoff pace the retry.
        if (leader === address) throw error;
        if (leader !== null) moveTo(leader, `named ${leader} as the leader (${method})`);
        else if (known.length > 1) moveTo(next(address), `did not serve ${method} (${error.code})`);
        if (tried.has(current)) throw error;
      }
    }
    throw lastError ?? new SluiceError("CONTROLLER_UNAVAILABLE", `${method} was not sent: this client was closed`);
  }

  return {
    get currentAddress() {
      return current;
    },
    requestQuota: (request, callOptions?: CallOptions) => call("RequestQuota", (c) => c.requestQuota(request, callOptions), callOptions?.signal),
    releaseQuota: (request, callOptions?: CallOptions) => call("ReleaseQuota", (c) => c.releaseQuota(request, callOptions), callOptions?.signal),
    renewLeases: (request, callOptions?: CallOptions) =>
      call("RenewLeases", (c) => (c.renewLeases ? c.renewLeases(request, callOptions) : Promise.reject(noRenewLeases())), callOptions?.signal),
    updateDynamicSpec: (json, callOptions?: CallOptions) => call("UpdateDynamicSpec", (c) => c.updateDynamicSpec(json, callOptions), callOptions?.signal),
    describeThrottlers: (callOptions?: CallOptions, filter?: DescribeThrottlersFilter) =>
      call("DescribeThrottlers", (c) => c.describeThrottlers(callOptions, filter), callOptions?.signal),
    reportWatermarks: (request, callOptions?: CallOptions) =>
      call(
        "ReportWatermarks",
        (c) =>
          c.reportWatermarks
            ? c.reportWatermarks(request, callOptions)
            : Promise.reject(new SluiceError("CONTROLLER_UNAVAILABLE", REPORT_WATERMARKS_UNIMPLEMENTED)),
        callOptions?.signal,
      ),
    watchDynamicSpec: (clientId, onUpdate, signal) => call("WatchDynamicSpec", (c) => c.watchDynamicSpec(clientId, onUpdate, signal), signal),
    close() {
      closed = true;
      for (const client of clients.values()) client.close();
      clients.clear();
    },
  };
}
