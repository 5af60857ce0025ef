"""Python client of the Sluice distributed throttler (the controller's gRPC quota service)."""

from .client import QuotaClient, RetryPolicy
from .errors import ERROR_CODES, SluiceError

__all__ = ["ERROR_CODES", "QuotaClient", "RetryPolicy", "SluiceError"]
