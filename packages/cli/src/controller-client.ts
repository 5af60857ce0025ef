import {
  FAILOVER_CHANNEL_OPTIONS,
  createLeaderFollowingClient,
  createQuotaClient,
  type LeaderFollowingClient,
  type QuotaClientOptions,
} from "@sluice/protocol";

export { parseControllerList } from "./command-options.ts";

/**
 * The gRPC client of every command that talks to a controller: with several addresses (docs/design.md §5.2,
 * `controller.addresses`) it follows the leader; with one it behaves as a plain client, and still
 * follows a follower's redirect. Quota calls travel on one QuotaStream per controller unless
 * SLUICE_QUOTA_TRANSPORT=unary (or `options.transport`) asks for one RPC per call.
 */
export function controllerClient(addresses: readonly string[], options: QuotaClientOptions = {}, log?: (line: string) => void): LeaderFollowingClient {
  return createLeaderFollowingClient(addresses, {
    // Pings only where there is somewhere else to go: one controller, paused, is waited for.
    connect: (address) =>
      createQuotaClient(address, addresses.length > 1 ? { ...options, channelOptions: { ...FAILOVER_CHANNEL_OPTIONS, ...options.channelOptions } } : options),
    ...(log ? { log } : {}),
  });
}
