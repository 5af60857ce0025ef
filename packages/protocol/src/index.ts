export type {
  CallContext,
  CallMetadata,
  CallOptions,
  DescribeThrottlersFilter,
  DynamicSpecUpdate,
  QuotaServiceClient,
  QuotaServiceHandler,
  ReleaseQuotaCall,
  RenewLeasesCall,
  PartitionBound,
  PartitionWatermarkReport,
  GroupWatermarkView,
  ReportWatermarksCall,
  ReportWatermarksResult,
  RequestQuotaCall,
  RequestQuotaResult,
} from "./quota-service.ts";
export { describeFilterOf, paceFieldsOf, REPORT_WATERMARKS_UNIMPLEMENTED, reportWatermarksCallOf, reportWatermarksResultOf } from "./quota-service.ts";
export {
  ERROR_CODE_METADATA_KEY,
  ERROR_DETAILS_METADATA_KEY,
  GRPC_STATUS_BY_CODE,
  LEADER_METADATA_KEY,
  leaderOf,
  MAX_STATUS_FIGURES_BYTES,
  MAX_STATUS_MESSAGE_LENGTH,
  deadlineExceededError,
  fromGrpcError,
  grpcStatusName,
  streamEndedStatus,
  toServiceError,
  type CallSite,
} from "./error-mapping.ts";
export { CALLER_TIMEOUT_METADATA_KEY, DEADLINE_ANSWER_GRACE_MS } from "./call-deadline.ts";
export { AUTHORIZATION_METADATA_KEY, bearer, fromGrpcMetadata, toGrpcMetadata } from "./call-metadata.ts";
export { DEFAULT_HOST, serveQuotaService, type QuotaServer, type ServeOptions } from "./grpc-server.ts";
export { QUOTA_CLIENT_CHANNEL_OPTIONS, createGrpcQuotaClient, type GrpcQuotaClientOptions } from "./grpc-client.ts";
export { createInMemoryQuotaClient, wireCopy, type InMemoryQuotaClientOptions } from "./in-memory-transport.ts";
export { QUOTA_PROTO_PATH, QUOTA_SERVICE_NAME, quotaServiceDefinition, type QuotaServiceDefinition } from "./proto-definition.ts";
export { toUint64 } from "./uint64.ts";
export {
  FAILOVER_CHANNEL_OPTIONS,
  createLeaderFollowingClient,
  type LeaderFollowingClient,
  type LeaderFollowingClientOptions,
} from "./leader-following-client.ts";
export {
  clientChannelCredentials,
  clientTlsProblem,
  diagnoseConnection,
  serverCredentials,
  serverTlsProblem,
  type ClientTlsOptions,
  type ConnectionDiagnosis,
  type ServerTlsOptions,
} from "./tls-credentials.ts";
export { fromGrpcDeadline, toGrpcDeadline } from "./grpc-deadline.ts";
export { createStreamQuotaClient } from "./quota-stream-client.ts";
export { DEFAULT_MAX_OPEN_CALLS_PER_STREAM } from "./quota-stream-limits.ts";
export {
  DEFAULT_QUOTA_TRANSPORT,
  QUOTA_TRANSPORT_ENV,
  QUOTA_TRANSPORTS,
  createQuotaClient,
  parseQuotaTransport,
  type QuotaClientOptions,
  type QuotaTransport,
} from "./quota-transport.ts";
