"""docs/design.md §4.5 in Python: every refusal is a SluiceError with a stable code and whether to retry."""

from __future__ import annotations

import json

import grpc

# code -> (retriable, gRPC status it travels as; None = raised by clients only)
ERROR_CODES: dict[str, tuple[bool, grpc.StatusCode | None]] = {
    "SPEC_INVALID": (False, grpc.StatusCode.INVALID_ARGUMENT),
    "THROTTLER_NOT_DECLARED": (False, None),
    "UNKNOWN_THROTTLER": (True, grpc.StatusCode.NOT_FOUND),
    "THROTTLER_REMOVED": (False, grpc.StatusCode.NOT_FOUND),
    "INVALID_AMOUNT": (False, grpc.StatusCode.INVALID_ARGUMENT),
    "INVALID_REQUEST": (False, grpc.StatusCode.INVALID_ARGUMENT),
    "QUEUE_FULL": (True, grpc.StatusCode.RESOURCE_EXHAUSTED),
    "QUOTA_TIMEOUT": (True, grpc.StatusCode.DEADLINE_EXCEEDED),
    "CONTROLLER_UNAVAILABLE": (True, grpc.StatusCode.UNAVAILABLE),
    "RETRIES_EXHAUSTED": (False, None),
    "CANCELLED": (False, grpc.StatusCode.CANCELLED),
    "UNAUTHENTICATED": (False, grpc.StatusCode.UNAUTHENTICATED),
    "TOO_MANY_CALLS": (False, grpc.StatusCode.RESOURCE_EXHAUSTED),
    "TOO_MANY_KEYS": (False, grpc.StatusCode.RESOURCE_EXHAUSTED),
    "LEASE_EXPIRED": (False, None),
}

#: Trailing metadata the controller sets on every refusal (protocol/src/error-mapping.ts).
ERROR_CODE_METADATA_KEY = "sluice-error-code"
ERROR_DETAILS_METADATA_KEY = "sluice-error-details-bin"


class SluiceError(Exception):
    """A refusal: ``code`` to branch on, ``retriable``, and ``details`` (the figures behind the message)."""

    def __init__(self, code: str, text: str, details: dict | None = None):
        super().__init__(f"{code}: {text}")
        self.code = code
        self.text = text
        self.retriable = ERROR_CODES.get(code, (False, None))[0]
        self.details = details or {}


def from_rpc_error(error: grpc.RpcError, method: str, address: str) -> SluiceError:
    """The controller's own code (trailing metadata) wins; without one, the status decides."""
    status = error.code() if hasattr(error, "code") else None
    message = error.details() if hasattr(error, "details") else str(error)
    message = message or str(status)
    trailers = dict(error.trailing_metadata() or ()) if hasattr(error, "trailing_metadata") else {}
    code = trailers.get(ERROR_CODE_METADATA_KEY)
    if isinstance(code, bytes):
        code = code.decode("ascii", "replace")
    if isinstance(code, str) and code in ERROR_CODES:
        return SluiceError(code, message[len(code) + 2 :] if message.startswith(f"{code}: ") else message, _figures(trailers))
    if status == grpc.StatusCode.DEADLINE_EXCEEDED:
        return SluiceError(
            "QUOTA_TIMEOUT",
            f"{method} to the controller at {address} passed its deadline before an answer came ({message}); "
            "a retry with the same request id resumes its place",
            {"address": address, "method": method},
        )
    if status == grpc.StatusCode.UNAUTHENTICATED:
        return SluiceError("UNAUTHENTICATED", f"{method} to {address} was refused as unauthenticated ({message}); check the controller token")
    if status == grpc.StatusCode.UNAVAILABLE:
        return SluiceError(
            "CONTROLLER_UNAVAILABLE",
            f"the controller at {address} is unreachable for {method} ({message}); it may be restarting: retry with backoff",
            {"address": address, "method": method},
        )
    name = status.name if status is not None else "an unknown status"
    return SluiceError(
        "CONTROLLER_UNAVAILABLE",
        f"{method} to the controller at {address} failed with {name}: {message}",
        {"address": address, "method": method, "grpc_status": name},
    )


def _figures(trailers: dict) -> dict:
    raw = trailers.get(ERROR_DETAILS_METADATA_KEY)
    if not isinstance(raw, bytes):
        return {}
    try:
        parsed = json.loads(raw.decode("utf-8"))
    except ValueError:
        return {}
    return parsed if isinstance(parsed, dict) else {}
