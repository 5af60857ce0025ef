"""Handles on one throttler and on one key of a keyed throttler (docs/design.md §11.4).

A handle holds names only, never a bucket: every call goes to the controller with the throttler id
(and the key), so a handle stays valid across ``sluice reconfigure`` (an override changed, the
template's limit changed, the throttler removed and declared again) and costs no memory per key.
"""

from __future__ import annotations

import json
import typing

from .errors import SluiceError
from .keys import check_key, not_keyed_error

if typing.TYPE_CHECKING:
    from .client import QuotaClient, RetryPolicy


class KeyHandle:
    """``key``'s own bucket of a keyed throttler: ``acquire`` and ``release`` as on the client."""

    def __init__(self, client: QuotaClient, throttler_id: str, key: str):
        self.client = client
        self.throttler_id = throttler_id
        self.key = key

    def acquire(self, amount: float = 1, *, quota_class: str = "", timestamp_ms: int = 0, retry: RetryPolicy | None = None) -> float:
        """Blocks until ``amount`` units of this key's bucket are granted; returns the seconds waited.

        A new key past the throttler's ``keyed.max_keys`` is refused at once with TOO_MANY_KEYS.
        """
        return self.client.acquire(self.throttler_id, amount, key=self.key, quota_class=quota_class, timestamp_ms=timestamp_ms, retry=retry)

    def release(self, amount: float, *, quota_class: str = "") -> None:
        """Gives back units of this key taken but not used."""
        self.client.release(self.throttler_id, amount, key=self.key, quota_class=quota_class)

    def __repr__(self) -> str:
        return f"KeyHandle({self.throttler_id!r}, key={self.key!r})"


class ThrottlerHandle:
    """One throttler of the controller: ``acquire``, ``release`` and ``for_key``."""

    def __init__(self, client: QuotaClient, throttler_id: str):
        self.client = client
        self.throttler_id = throttler_id
        # Only "keyed" is remembered: a throttler seen unkeyed may be made keyed by a reconfiguration,
        # so that answer is asked again at the next for_key.
        self._seen_keyed = False

    def acquire(self, amount: float = 1, *, quota_class: str = "", timestamp_ms: int = 0, retry: RetryPolicy | None = None) -> float:
        return self.client.acquire(self.throttler_id, amount, quota_class=quota_class, timestamp_ms=timestamp_ms, retry=retry)

    def release(self, amount: float, *, quota_class: str = "") -> None:
        self.client.release(self.throttler_id, amount, quota_class=quota_class)

    def for_key(self, key: str) -> KeyHandle:
        """A handle on ``key``'s own bucket of this keyed throttler, stable across reconfiguration.

        The key is 1 to 256 UTF-8 bytes (else INVALID_REQUEST with the figures). A throttler the
        controller describes as not keyed fails at once with INVALID_REQUEST naming it. When the
        controller cannot be asked now, the handle is returned and the controller checks at the
        first call (it refuses a key on a throttler that is not keyed with the same code).
        """
        checked = check_key(self.throttler_id, key)
        if not self._seen_keyed:
            keyed = self._keyed_now()
            if keyed is False:
                raise not_keyed_error(self.throttler_id)
            self._seen_keyed = keyed is True
        return KeyHandle(self.client, self.throttler_id, checked)

    def _keyed_now(self) -> bool | None:
        """Whether the controller's snapshot has a ``keyed`` section for this throttler; None when unknown."""
        try:
            snapshot = json.loads(self.client.describe_throttlers())
        except (SluiceError, ValueError):
            return None
        for throttler in snapshot.get("throttlers", ()):
            if throttler.get("id") == self.throttler_id:
                return throttler.get("keyed") is not None
        return None  # not declared (yet): the first call answers UNKNOWN_THROTTLER, retried as usual

    def __repr__(self) -> str:
        return f"ThrottlerHandle({self.throttler_id!r})"
