"""for_key against a real `sluice controller` (keyed throttlers declared in test/e2e/python-client.test.ts).

py_keyed: limit 10/s per key, period 1s, the key "gold" overridden to 30/s; py_few_keys: max_keys 1.
"""

import json
import threading
import time

import pytest

from sluice_client import MAX_KEY_BYTES, QuotaClient, SluiceError


def keyed_section(quota: QuotaClient, throttler_id: str) -> dict:
    snapshot = json.loads(quota.describe_throttlers())
    return next(t for t in snapshot["throttlers"] if t["id"] == throttler_id)["keyed"]


def test_two_keys_run_at_their_own_limits(quota):
    # Each key's bucket starts full (its limit), so at most limit + limit × T units pass in T
    # seconds; a loaded machine may grant less, never more. The lower bound is loose (half the
    # rate) because every acquire is one RPC and the machine is shared; the ratio of the two keys'
    # counts shows each ran at its own limit, not a shared one.
    keyed = quota.throttler("py_keyed")
    limits = {"plain": 10, "gold": 30}
    handles = {key: keyed.for_key(key) for key in limits}
    counts = {key: 0 for key in limits}
    lock = threading.Lock()
    seconds = 3.0
    started = time.monotonic()

    def worker(key: str) -> None:
        while time.monotonic() - started < seconds:
            handles[key].acquire(1)
            with lock:
                counts[key] += 1

    threads = [threading.Thread(target=worker, args=(key,)) for key in limits for _ in range(3)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=60)
    elapsed = time.monotonic() - started
    for key, limit in limits.items():
        assert counts[key] <= limit + limit * elapsed + 3, f"key {key}: {counts[key]} units in {elapsed:.2f} s exceeds {limit} + {limit}/s"
        assert counts[key] >= 0.5 * limit * elapsed, f"key {key}: {counts[key]} units in {elapsed:.2f} s is far below {limit}/s"
    assert counts["gold"] >= 1.8 * counts["plain"], f"gold (30/s) {counts['gold']} vs plain (10/s) {counts['plain']}: not their own limits"
    assert keyed_section(quota, "py_keyed")["keys"] >= 2


def test_a_new_key_past_max_keys_is_too_many_keys_at_once(quota):
    few = quota.throttler("py_few_keys")
    few.for_key("first").acquire(1)
    started = time.monotonic()
    with pytest.raises(SluiceError) as raised:
        few.for_key("second").acquire(1)
    assert raised.value.code == "TOO_MANY_KEYS" and not raised.value.retriable, raised.value
    assert "max_keys of 1" in str(raised.value) and "py_few_keys" in str(raised.value)
    assert time.monotonic() - started < 10, "TOO_MANY_KEYS was retried"
    few.for_key("first").acquire(1)  # the live key is not dropped to make room
    assert keyed_section(quota, "py_few_keys")["refusedKeys"] >= 1


def test_for_key_on_a_plain_throttler_fails_naming_it(quota):
    with pytest.raises(SluiceError) as raised:
        quota.throttler("py_rate").for_key("acme")
    assert raised.value.code == "INVALID_REQUEST" and not raised.value.retriable
    assert "'py_rate' is not keyed" in str(raised.value)
    # The controller refuses a key on a throttler that is not keyed too (a handle made before a
    # reconfiguration removed `keyed` meets this).
    with pytest.raises(SluiceError) as refused:
        quota.acquire("py_rate", 1, key="acme")
    assert refused.value.code == "INVALID_REQUEST" and '"py_rate" is not keyed' in str(refused.value), refused.value


def test_a_key_is_checked_with_the_figures_before_it_travels(quota):
    keyed = quota.throttler("py_keyed")
    with pytest.raises(SluiceError) as empty:
        keyed.for_key("")
    assert empty.value.code == "INVALID_REQUEST" and "empty" in str(empty.value) and "py_keyed" in str(empty.value)
    with pytest.raises(SluiceError) as long:
        keyed.for_key("é" * 129)
    assert long.value.code == "INVALID_REQUEST"
    assert "258 UTF-8 bytes" in str(long.value) and f"the {MAX_KEY_BYTES} a key may have" in str(long.value)
    assert long.value.details == {"throttler_id": "py_keyed", "max_key_bytes": 256, "key_bytes": 258}
    with pytest.raises(SluiceError) as not_text:
        keyed.for_key(42)
    assert not_text.value.code == "INVALID_REQUEST" and "got int" in str(not_text.value)
    keyed.for_key("é" * 128).acquire(1)  # 256 bytes: the most a key may have


def test_handles_are_stable_and_give_units_back(quota):
    assert quota.throttler("py_keyed") is quota.throttler("py_keyed")
    handle = quota.throttler("py_keyed").for_key("returns")
    handle.acquire(2)
    handle.release(2)
    assert repr(handle) == "KeyHandle('py_keyed', key='returns')"
