from google.protobuf.internal import containers as _containers
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class RequestQuotaRequest(_message.Message):
    __slots__ = ("throttler_id", "client_id", "amount", "timestamp_ms", "quota_class_id", "request_id", "key")
    THROTTLER_ID_FIELD_NUMBER: _ClassVar[int]
    CLIENT_ID_FIELD_NUMBER: _ClassVar[int]
    AMOUNT_FIELD_NUMBER: _ClassVar[int]
    TIMESTAMP_MS_FIELD_NUMBER: _ClassVar[int]
    QUOTA_CLASS_ID_FIELD_NUMBER: _ClassVar[int]
    REQUEST_ID_FIELD_NUMBER: _ClassVar[int]
    KEY_FIELD_NUMBER: _ClassVar[int]
    throttler_id: str
    client_id: str
    amount: float
    timestamp_ms: int
    quota_class_id: str
    request_id: str
    key: str
    def __init__(self, throttler_id: _Optional[str] = ..., client_id: _Optional[str] = ..., amount: _Optional[float] = ..., timestamp_ms: _Optional[int] = ..., quota_class_id: _Optional[str] = ..., request_id: _Optional[str] = ..., key: _Optional[str] = ...) -> None: ...

class RequestQuotaResponse(_message.Message):
    __slots__ = ("granted", "waited_ms", "pace_start_delay_ms", "pace_interval_ms", "pace_answered_at_ms")
    GRANTED_FIELD_NUMBER: _ClassVar[int]
    WAITED_MS_FIELD_NUMBER: _ClassVar[int]
    PACE_START_DELAY_MS_FIELD_NUMBER: _ClassVar[int]
    PACE_INTERVAL_MS_FIELD_NUMBER: _ClassVar[int]
    PACE_ANSWERED_AT_MS_FIELD_NUMBER: _ClassVar[int]
    granted: float
    waited_ms: int
    pace_start_delay_ms: float
    pace_interval_ms: float
    pace_answered_at_ms: float
    def __init__(self, granted: _Optional[float] = ..., waited_ms: _Optional[int] = ..., pace_start_delay_ms: _Optional[float] = ..., pace_interval_ms: _Optional[float] = ..., pace_answered_at_ms: _Optional[float] = ...) -> None: ...

class ReleaseQuotaRequest(_message.Message):
    __slots__ = ("throttler_id", "client_id", "amount", "quota_class_id", "key")
    THROTTLER_ID_FIELD_NUMBER: _ClassVar[int]
    CLIENT_ID_FIELD_NUMBER: _ClassVar[int]
    AMOUNT_FIELD_NUMBER: _ClassVar[int]
    QUOTA_CLASS_ID_FIELD_NUMBER: _ClassVar[int]
    KEY_FIELD_NUMBER: _ClassVar[int]
    throttler_id: str
    client_id: str
    amount: float
    quota_class_id: str
    key: str
    def __init__(self, throttler_id: _Optional[str] = ..., client_id: _Optional[str] = ..., amount: _Optional[float] = ..., quota_class_id: _Optional[str] = ..., key: _Optional[str] = ...) -> None: ...

class ReleaseQuotaResponse(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class WatchDynamicSpecRequest(_message.Message):
    __slots__ = ("client_id",)
    CLIENT_ID_FIELD_NUMBER: _ClassVar[int]
    client_id: str
    def __init__(self, client_id: _Optional[str] = ...) -> None: ...

class DynamicSpecUpdate(_message.Message):
    __slots__ = ("version", "dynamic_spec_json")
    VERSION_FIELD_NUMBER: _ClassVar[int]
    DYNAMIC_SPEC_JSON_FIELD_NUMBER: _ClassVar[int]
    version: int
    dynamic_spec_json: str
    def __init__(self, version: _Optional[int] = ..., dynamic_spec_json: _Optional[str] = ...) -> None: ...

class UpdateDynamicSpecRequest(_message.Message):
    __slots__ = ("dynamic_spec_json",)
    DYNAMIC_SPEC_JSON_FIELD_NUMBER: _ClassVar[int]
    dynamic_spec_json: str
    def __init__(self, dynamic_spec_json: _Optional[str] = ...) -> None: ...

class UpdateDynamicSpecResponse(_message.Message):
    __slots__ = ("version",)
    VERSION_FIELD_NUMBER: _ClassVar[int]
    version: int
    def __init__(self, version: _Optional[int] = ...) -> None: ...

class DescribeThrottlersRequest(_message.Message):
    __slots__ = ("throttler_id", "key")
    THROTTLER_ID_FIELD_NUMBER: _ClassVar[int]
    KEY_FIELD_NUMBER: _ClassVar[int]
    throttler_id: str
    key: str
    def __init__(self, throttler_id: _Optional[str] = ..., key: _Optional[str] = ...) -> None: ...

class DescribeThrottlersResponse(_message.Message):
    __slots__ = ("snapshot_json",)
    SNAPSHOT_JSON_FIELD_NUMBER: _ClassVar[int]
    snapshot_json: str
    def __init__(self, snapshot_json: _Optional[str] = ...) -> None: ...

class RenewLeasesRequest(_message.Message):
    __slots__ = ("client_id", "throttler_ids", "key")
    CLIENT_ID_FIELD_NUMBER: _ClassVar[int]
    THROTTLER_IDS_FIELD_NUMBER: _ClassVar[int]
    KEY_FIELD_NUMBER: _ClassVar[int]
    client_id: str
    throttler_ids: _containers.RepeatedScalarFieldContainer[str]
    key: str
    def __init__(self, client_id: _Optional[str] = ..., throttler_ids: _Optional[_Iterable[str]] = ..., key: _Optional[str] = ...) -> None: ...

class RenewLeasesResponse(_message.Message):
    __slots__ = ("held",)
    HELD_FIELD_NUMBER: _ClassVar[int]
    held: float
    def __init__(self, held: _Optional[float] = ...) -> None: ...

class PartitionWatermark(_message.Message):
    __slots__ = ("group_name", "partition_id", "watermark_ms", "idle", "held")
    GROUP_NAME_FIELD_NUMBER: _ClassVar[int]
    PARTITION_ID_FIELD_NUMBER: _ClassVar[int]
    WATERMARK_MS_FIELD_NUMBER: _ClassVar[int]
    IDLE_FIELD_NUMBER: _ClassVar[int]
    HELD_FIELD_NUMBER: _ClassVar[int]
    group_name: str
    partition_id: str
    watermark_ms: int
    idle: bool
    held: bool
    def __init__(self, group_name: _Optional[str] = ..., partition_id: _Optional[str] = ..., watermark_ms: _Optional[int] = ..., idle: _Optional[bool] = ..., held: _Optional[bool] = ...) -> None: ...

class ReportWatermarksRequest(_message.Message):
    __slots__ = ("client_id", "partitions")
    CLIENT_ID_FIELD_NUMBER: _ClassVar[int]
    PARTITIONS_FIELD_NUMBER: _ClassVar[int]
    client_id: str
    partitions: _containers.RepeatedCompositeFieldContainer[PartitionWatermark]
    def __init__(self, client_id: _Optional[str] = ..., partitions: _Optional[_Iterable[_Union[PartitionWatermark, _Mapping]]] = ...) -> None: ...

class PartitionBound(_message.Message):
    __slots__ = ("partition_id", "others_watermark_ms", "unbounded")
    PARTITION_ID_FIELD_NUMBER: _ClassVar[int]
    OTHERS_WATERMARK_MS_FIELD_NUMBER: _ClassVar[int]
    UNBOUNDED_FIELD_NUMBER: _ClassVar[int]
    partition_id: str
    others_watermark_ms: int
    unbounded: bool
    def __init__(self, partition_id: _Optional[str] = ..., others_watermark_ms: _Optional[int] = ..., unbounded: _Optional[bool] = ...) -> None: ...

class GroupWatermark(_message.Message):
    __slots__ = ("group_name", "watermark_ms", "partitions", "held", "idle")
    GROUP_NAME_FIELD_NUMBER: _ClassVar[int]
    WATERMARK_MS_FIELD_NUMBER: _ClassVar[int]
    PARTITIONS_FIELD_NUMBER: _ClassVar[int]
    HELD_FIELD_NUMBER: _ClassVar[int]
    IDLE_FIELD_NUMBER: _ClassVar[int]
    group_name: str
    watermark_ms: int
    partitions: int
    held: int
    idle: int
    def __init__(self, group_name: _Optional[str] = ..., watermark_ms: _Optional[int] = ..., partitions: _Optional[int] = ..., held: _Optional[int] = ..., idle: _Optional[int] = ...) -> None: ...

class ReportWatermarksResponse(_message.Message):
    __slots__ = ("bounds", "groups", "controller_instance", "settling")
    BOUNDS_FIELD_NUMBER: _ClassVar[int]
    GROUPS_FIELD_NUMBER: _ClassVar[int]
    CONTROLLER_INSTANCE_FIELD_NUMBER: _ClassVar[int]
    SETTLING_FIELD_NUMBER: _ClassVar[int]
    bounds: _containers.RepeatedCompositeFieldContainer[PartitionBound]
    groups: _containers.RepeatedCompositeFieldContainer[GroupWatermark]
    controller_instance: str
    settling: bool
    def __init__(self, bounds: _Optional[_Iterable[_Union[PartitionBound, _Mapping]]] = ..., groups: _Optional[_Iterable[_Union[GroupWatermark, _Mapping]]] = ..., controller_instance: _Optional[str] = ..., settling: _Optional[bool] = ...) -> None: ...

class QuotaStreamClientFrame(_message.Message):
    __slots__ = ("calls",)
    CALLS_FIELD_NUMBER: _ClassVar[int]
    calls: _containers.RepeatedCompositeFieldContainer[QuotaStreamCall]
    def __init__(self, calls: _Optional[_Iterable[_Union[QuotaStreamCall, _Mapping]]] = ...) -> None: ...

class QuotaStreamCall(_message.Message):
    __slots__ = ("call_id", "timeout_ms", "metadata", "request_quota", "release_quota", "renew_leases", "watch_dynamic_spec", "cancel")
    class MetadataEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: str
        def __init__(self, key: _Optional[str] = ..., value: _Optional[str] = ...) -> None: ...
    CALL_ID_FIELD_NUMBER: _ClassVar[int]
    TIMEOUT_MS_FIELD_NUMBER: _ClassVar[int]
    METADATA_FIELD_NUMBER: _ClassVar[int]
    REQUEST_QUOTA_FIELD_NUMBER: _ClassVar[int]
    RELEASE_QUOTA_FIELD_NUMBER: _ClassVar[int]
    RENEW_LEASES_FIELD_NUMBER: _ClassVar[int]
    WATCH_DYNAMIC_SPEC_FIELD_NUMBER: _ClassVar[int]
    CANCEL_FIELD_NUMBER: _ClassVar[int]
    call_id: int
    timeout_ms: int
    metadata: _containers.ScalarMap[str, str]
    request_quota: RequestQuotaRequest
    release_quota: ReleaseQuotaRequest
    renew_leases: RenewLeasesRequest
    watch_dynamic_spec: WatchDynamicSpecRequest
    cancel: QuotaStreamCancel
    def __init__(self, call_id: _Optional[int] = ..., timeout_ms: _Optional[int] = ..., metadata: _Optional[_Mapping[str, str]] = ..., request_quota: _Optional[_Union[RequestQuotaRequest, _Mapping]] = ..., release_quota: _Optional[_Union[ReleaseQuotaRequest, _Mapping]] = ..., renew_leases: _Optional[_Union[RenewLeasesRequest, _Mapping]] = ..., watch_dynamic_spec: _Optional[_Union[WatchDynamicSpecRequest, _Mapping]] = ..., cancel: _Optional[_Union[QuotaStreamCancel, _Mapping]] = ...) -> None: ...

class QuotaStreamCancel(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class QuotaStreamServerFrame(_message.Message):
    __slots__ = ("answers",)
    ANSWERS_FIELD_NUMBER: _ClassVar[int]
    answers: _containers.RepeatedCompositeFieldContainer[QuotaStreamAnswer]
    def __init__(self, answers: _Optional[_Iterable[_Union[QuotaStreamAnswer, _Mapping]]] = ...) -> None: ...

class QuotaStreamAnswer(_message.Message):
    __slots__ = ("call_id", "request_quota", "release_quota", "renew_leases", "dynamic_spec_update", "error")
    CALL_ID_FIELD_NUMBER: _ClassVar[int]
    REQUEST_QUOTA_FIELD_NUMBER: _ClassVar[int]
    RELEASE_QUOTA_FIELD_NUMBER: _ClassVar[int]
    RENEW_LEASES_FIELD_NUMBER: _ClassVar[int]
    DYNAMIC_SPEC_UPDATE_FIELD_NUMBER: _ClassVar[int]
    ERROR_FIELD_NUMBER: _ClassVar[int]
    call_id: int
    request_quota: RequestQuotaResponse
    release_quota: ReleaseQuotaResponse
    renew_leases: RenewLeasesResponse
    dynamic_spec_update: DynamicSpecUpdate
    error: QuotaStreamError
    def __init__(self, call_id: _Optional[int] = ..., request_quota: _Optional[_Union[RequestQuotaResponse, _Mapping]] = ..., release_quota: _Optional[_Union[ReleaseQuotaResponse, _Mapping]] = ..., renew_leases: _Optional[_Union[RenewLeasesResponse, _Mapping]] = ..., dynamic_spec_update: _Optional[_Union[DynamicSpecUpdate, _Mapping]] = ..., error: _Optional[_Union[QuotaStreamError, _Mapping]] = ...) -> None: ...

class QuotaStreamError(_message.Message):
    __slots__ = ("grpc_status", "message", "sluice_error_code", "details_json", "leader")
    GRPC_STATUS_FIELD_NUMBER: _ClassVar[int]
    MESSAGE_FIELD_NUMBER: _ClassVar[int]
    SLUICE_ERROR_CODE_FIELD_NUMBER: _ClassVar[int]
    DETAILS_JSON_FIELD_NUMBER: _ClassVar[int]
    LEADER_FIELD_NUMBER: _ClassVar[int]
    grpc_status: int
    message: str
    sluice_error_code: str
    details_json: str
    leader: str
    def __init__(self, grpc_status: _Optional[int] = ..., message: _Optional[str] = ..., sluice_error_code: _Optional[str] = ..., details_json: _Optional[str] = ..., leader: _Optional[str] = ...) -> None: ...
