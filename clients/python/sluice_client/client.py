"""A Python client of the Sluice controller's quota service (docs/design.md §9.8, §4).

``acquire`` blocks until the controller granted ``amount`` in full. One logical request keeps ONE
request id across its retries, so the controller grants it once and a retry after a deadline
resumes its place in the queue. Retriable refusals (``ERROR_CODES``) are retried with exponential
backoff and jitter until ``retry_attempts`` or ``retry_timeout`` is spent; then RETRIES_EXHAUSTED.
There is no fallback to a local limit. Unlike the Node client it does not prefetch: every
``acquire`` is one RequestQuota (plus its retries). ``throttler(id)`` is a handle on one throttler;
its ``for_key(key)`` is a handle on one key's bucket of a keyed throttler (handles.py).
"""

from __future__ import annotations

import random
import threading
import time
import uuid
from dataclasses import dataclass

import grpc

from ._generated import quota_pb2, quota_pb2_grpc
from .errors import SluiceError, from_rpc_error
from .handles import ThrottlerHandle
from .keys import check_key

#: The caller's remaining time in whole ms: the controller answers QUOTA_TIMEOUT at it, and the
#: transport deadline comes DEADLINE_ANSWER_GRACE later, so an expiring wait ends cleanly rather than
#: by a stream reset (protocol/src/call-deadline.ts explains why resets must stay rare).
CALLER_TIMEOUT_METADATA_KEY = "sluice-timeout-ms"
DEADLINE_ANSWER_GRACE = 1.0


@dataclass(frozen=True)
class RetryPolicy:
    """The throttler spec's ``rpc_timeout`` and ``retrying_channel``, with the same defaults."""

    #: Deadline of one RequestQuota attempt, seconds (a queued request keeps its place past it).
    rpc_timeout: float = 30.0
    retry_attempts: int = 100
    #: Give up after this long in all, seconds.
    retry_timeout: float = 600.0
    min_backoff: float = 1.0
    max_backoff: float = 5.0
    backoff_multiplier: float = 1.5
    #: Fraction of each pause drawn at random, so that clients do not retry in step.
    jitter: float = 0.1

    def backoff(self, attempt: int, rand: float) -> float:
        base = min(self.max_backoff, self.min_backoff * self.backoff_multiplier ** (attempt - 1))
        return base * (1 - self.jitter + 2 * self.jitter * rand)


class QuotaClient:
    """Quota from a running ``sluice controller``; thread-safe, one gRPC channel.

    >>> with QuotaClient("127.0.0.1:7070", client_id="reports-1") as quota:
    ...     quota.acquire("external_api", 1)
    """

    def __init__(
        self,
        address: str,
        client_id: str,
        *,
        token: str | None = None,
        retry: RetryPolicy | None = None,
        credentials: grpc.ChannelCredentials | None = None,
    ):
        if not client_id or not client_id.strip():
            raise ValueError(f"client_id must be a non-empty string that names this caller, got {client_id!r}")
        self.address = address
        self.client_id = client_id
        self.retry = retry or RetryPolicy()
        self._metadata = (("authorization", f"Bearer {token}"),) if token is not None else ()
        self._channel = grpc.secure_channel(address, credentials) if credentials is not None else grpc.insecure_channel(address)
        self._stub = quota_pb2_grpc.QuotaServiceStub(self._channel)
        self._closed = threading.Event()
        self._random = random.Random()
        self._handles: dict[str, ThrottlerHandle] = {}
        self._handles_lock = threading.Lock()

    def throttler(self, throttler_id: str) -> ThrottlerHandle:
        """The handle on ``throttler_id`` (the same object for the same id): ``acquire``, ``release``, ``for_key``."""
        with self._handles_lock:
            handle = self._handles.get(throttler_id)
            if handle is None:
                handle = self._handles[throttler_id] = ThrottlerHandle(self, throttler_id)
            return handle

    def acquire(
        self,
        throttler_id: str,
        amount: float = 1,
        *,
        key: str = "",
        quota_class: str = "",
        timestamp_ms: int = 0,
        retry: RetryPolicy | None = None,
    ) -> float:
        """Blocks until ``amount`` units of ``throttler_id`` are granted; returns the seconds waited.

        Raises SluiceError: at once for what retrying cannot cure (INVALID_AMOUNT, UNAUTHENTICATED),
        RETRIES_EXHAUSTED (with the last error) once the retry budget is spent, CANCELLED after close().
        ``key`` (a keyed throttler's bucket; "" = not keyed) is what ``for_key`` passes; TOO_MANY_KEYS
        is raised at once.
        """
        policy = retry or self.retry
        if key != "":
            check_key(throttler_id, key)
        where = f"throttler {throttler_id!r}" + (f" key {key!r}" if key else "")
        request = quota_pb2.RequestQuotaRequest(
            throttler_id=throttler_id,
            client_id=self.client_id,
            amount=amount,
            timestamp_ms=max(0, int(timestamp_ms)),
            quota_class_id=quota_class,
            request_id=str(uuid.uuid4()),  # the same for every retry below
            key=key,
        )
        started = time.monotonic()
        give_up_at = started + policy.retry_timeout
        attempt = 0
        while True:
            attempt += 1
            if self._closed.is_set():
                raise SluiceError("CANCELLED", f"quota request {request.request_id} on {where}: the client was closed")
            timeout = max(0.001, min(policy.rpc_timeout, give_up_at - time.monotonic()))
            metadata = (*self._metadata, (CALLER_TIMEOUT_METADATA_KEY, str(int(timeout * 1000))))
            try:
                self._stub.RequestQuota(request, timeout=timeout + DEADLINE_ANSWER_GRACE, metadata=metadata)
                return time.monotonic() - started
            except grpc.RpcError as rpc_error:
                error = from_rpc_error(rpc_error, "RequestQuota", self.address)
            if self._closed.is_set():
                raise SluiceError("CANCELLED", f"quota request {request.request_id} on {where}: the client was closed")
            if not error.retriable:
                raise error
            # A request that timed out while queued is still queued under its id: ask again at once.
            pause = 0.0 if error.code == "QUOTA_TIMEOUT" else policy.backoff(attempt, self._random.random())
            elapsed = time.monotonic() - started
            if attempt >= policy.retry_attempts or time.monotonic() + pause >= give_up_at:
                raise SluiceError(
                    "RETRIES_EXHAUSTED",
                    f"{where}: RequestQuota for {amount} units failed {attempt} times over "
                    f"{elapsed * 1000:.0f} ms (retry_attempts {policy.retry_attempts}, retry_timeout {policy.retry_timeout} s); "
                    f"last error: {error}",
                    {"throttler_id": throttler_id, "key": key, "amount": amount, "attempts": attempt, "last_code": error.code},
                ) from error
            if pause > 0 and self._closed.wait(pause):
                continue  # closed while pausing: the loop raises CANCELLED

    def release(self, throttler_id: str, amount: float, *, key: str = "", quota_class: str = "") -> None:
        """Gives back units taken but not used (best effort: the controller may be away); ``key`` as on acquire."""
        if key != "":
            check_key(throttler_id, key)
        request = quota_pb2.ReleaseQuotaRequest(throttler_id=throttler_id, client_id=self.client_id, amount=amount, quota_class_id=quota_class, key=key)
        try:
            self._stub.ReleaseQuota(request, timeout=self.retry.rpc_timeout, metadata=self._metadata)
        except grpc.RpcError as rpc_error:
            raise from_rpc_error(rpc_error, "ReleaseQuota", self.address) from None

    def describe_throttlers(self) -> str:
        """The controller's snapshot (limits, rates, queues, classes) as JSON text."""
        try:
            response = self._stub.DescribeThrottlers(quota_pb2.DescribeThrottlersRequest(), timeout=self.retry.rpc_timeout, metadata=self._metadata)
        except grpc.RpcError as rpc_error:
            raise from_rpc_error(rpc_error, "DescribeThrottlers", self.address) from None
        return response.snapshot_json

    def close(self) -> None:
        """Ends waiting and later calls with CANCELLED; closes the channel."""
        self._closed.set()
        self._channel.close()

    def __enter__(self) -> "QuotaClient":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
