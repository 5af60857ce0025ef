"""Keys of keyed throttlers (docs/design.md §11.4), checked before anything travels: the same rule,
figures and code as the controller and the Node client's ``forKey``."""

from __future__ import annotations

from .errors import SluiceError

#: A key is at most this many UTF-8 bytes: it travels in every request and names a bucket.
MAX_KEY_BYTES = 256


def key_problem(key: object) -> str | None:
    """Why ``key`` cannot name a bucket, with the figures; None when it can."""
    if not isinstance(key, str):
        return f"the key must be a string, got {type(key).__name__}"
    if key == "":
        return f"the key is empty; a key names one customer, model or host and has 1 to {MAX_KEY_BYTES} UTF-8 bytes"
    try:
        size = len(key.encode("utf-8"))
    except UnicodeEncodeError as error:
        return f"the key is not valid Unicode text ({error.reason} at index {error.start}), so it has no UTF-8 form"
    if size > MAX_KEY_BYTES:
        return f"the key has {size} UTF-8 bytes ({key[:32]!r}…), more than the {MAX_KEY_BYTES} a key may have"
    return None


def check_key(throttler_id: str, key: object) -> str:
    """``key`` when it can name a bucket of ``throttler_id``; else INVALID_REQUEST (not retriable) with the figures."""
    problem = key_problem(key)
    if problem is None:
        return key  # type: ignore[return-value]  # key_problem returned None, so key is a str
    details: dict = {"throttler_id": throttler_id, "max_key_bytes": MAX_KEY_BYTES}
    if isinstance(key, str):
        details["key_bytes"] = len(key.encode("utf-8", "surrogatepass"))
    raise SluiceError("INVALID_REQUEST", f"for_key on throttler {throttler_id!r}: {problem}", details)


def not_keyed_error(throttler_id: str) -> SluiceError:
    """for_key on a throttler whose spec has no ``keyed``: names the throttler and the fix."""
    return SluiceError(
        "INVALID_REQUEST",
        f"for_key: throttler {throttler_id!r} is not keyed, so it has no bucket per key; "
        'add "keyed": {} to it in dynamic_spec.throttlers (sluice reconfigure), or call it without for_key',
        {"throttler_id": throttler_id},
    )
