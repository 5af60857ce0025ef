"""Python client of the Sluice distributed throttler (the controller's gRPC quota service)."""

from .client import QuotaClient, RetryPolicy
from .errors import ERROR_CODES, SluiceError
from .handles import KeyHandle, ThrottlerHandle
from .keys import MAX_KEY_BYTES

__all__ = ["ERROR_CODES", "KeyHandle", "MAX_KEY_BYTES", "QuotaClient", "RetryPolicy", "SluiceError", "ThrottlerHandle"]
