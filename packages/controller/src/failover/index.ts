export { FailoverController, type FailoverControllerOptions } from "./failover-controller.ts";
export type { FailoverRole, FailoverStatus } from "../quota/failover-status.ts";
export { LeaderLease } from "./leader-lease.ts";
export { GroupCommit } from "./group-commit.ts";
export { startFailoverController, type StartFailoverControllerOptions, type RunningFailoverController } from "./failover-server.ts";
