"""The Python client against a real `sluice controller` (throttlers in test/e2e/python-client.test.ts)."""

import json
import threading
import time

import pytest

from sluice_client import QuotaClient, RetryPolicy, SluiceError

ONE_ATTEMPT = RetryPolicy(retry_attempts=1)


def throttler(quota: QuotaClient, throttler_id: str) -> dict:
    snapshot = json.loads(quota.describe_throttlers())
    return next(t for t in snapshot["throttlers"] if t["id"] == throttler_id)


def test_rate_stays_within_the_limit(quota):
    # py_rate: limit 20/s, period 1s (starts full with 20). Four threads for 3 s: at most
    # 20 + 20 × T units can be granted in all; a loaded machine may grant less, never more.
    limit, seconds = 20, 3.0
    counts = [0] * 4
    started = time.monotonic()

    def worker(i: int) -> None:
        while time.monotonic() - started < seconds:
            quota.acquire("py_rate", 1)
            counts[i] += 1

    threads = [threading.Thread(target=worker, args=(i,)) for i in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=60)
    elapsed = time.monotonic() - started
    total = sum(counts)
    assert total <= limit + limit * elapsed + 1, f"{total} units in {elapsed:.2f} s exceeds {limit} + {limit}/s"
    assert total >= 0.7 * limit * elapsed, f"{total} units in {elapsed:.2f} s is far below {limit}/s"


def test_a_retry_after_a_deadline_keeps_the_request_id_and_its_place(quota):
    # py_slow: limit 1/s, capacity 1. Two units pass at once (pay-after) and leave the bucket 1 in
    # debt; the next unit waits about 1 s, past its 0.3 s RPC deadline: QUOTA_TIMEOUT, retried at
    # once under the same request id, which the controller recognises and grants once.
    before = throttler(quota, "py_slow")["counters"]
    quota.acquire("py_slow", 2)
    waited = quota.acquire("py_slow", 1, retry=RetryPolicy(rpc_timeout=0.3))
    after = throttler(quota, "py_slow")["counters"]
    assert waited >= 0.3
    assert after["granted"] - before["granted"] == 3, "the retried request was granted more than once"
    assert after["reattached"] + after["joined"] > before["reattached"] + before["joined"], after


def test_unknown_throttler_is_mapped_and_retriable(quota):
    with pytest.raises(SluiceError) as raised:
        quota.acquire("no_such_throttler", 1, retry=ONE_ATTEMPT)
    assert raised.value.code == "RETRIES_EXHAUSTED"
    cause = raised.value.__cause__
    assert isinstance(cause, SluiceError) and cause.code == "UNKNOWN_THROTTLER" and cause.retriable
    assert "no_such_throttler" in str(cause)


def test_queue_full_is_mapped_with_the_figures(quota, controller):
    # py_tiny: limit 1/s, max_queue_size 1. Two units put the bucket 1 in debt (pay-after), the
    # next request waits in the queue for about 1 s, and one more is refused.
    quota.acquire("py_tiny", 2)
    queued = threading.Thread(target=lambda: quota.acquire("py_tiny", 1))
    queued.start()
    time.sleep(0.3)
    with pytest.raises(SluiceError) as raised:
        quota.acquire("py_tiny", 1, retry=ONE_ATTEMPT)
    queued.join(timeout=30)
    cause = raised.value.__cause__
    assert isinstance(cause, SluiceError) and cause.code == "QUEUE_FULL", raised.value
    assert cause.retriable
    assert "max_queue_size 1" in str(cause)


def test_what_retrying_cannot_cure_is_raised_at_once(quota, controller):
    started = time.monotonic()
    with pytest.raises(SluiceError) as invalid:
        quota.acquire("py_rate", -1)
    assert invalid.value.code == "INVALID_AMOUNT" and not invalid.value.retriable
    address, _ = controller
    with QuotaClient(address, client_id="pytest-wrong-token", token="wrong") as stranger:
        with pytest.raises(SluiceError) as refused:
            stranger.acquire("py_rate", 1)
    assert refused.value.code == "UNAUTHENTICATED"
    assert time.monotonic() - started < 10, "a non-retriable refusal was retried"


def test_an_unreachable_controller_exhausts_the_retries_with_the_last_error():
    with QuotaClient("127.0.0.1:1", client_id="pytest-nowhere") as nowhere:
        with pytest.raises(SluiceError) as raised:
            nowhere.acquire("py_rate", 1, retry=RetryPolicy(retry_attempts=2, min_backoff=0.05, rpc_timeout=2))
    assert raised.value.code == "RETRIES_EXHAUSTED"
    assert raised.value.details["last_code"] == "CONTROLLER_UNAVAILABLE"
    assert "failed 2 times" in str(raised.value)


def test_a_malformed_request_is_invalid_request(controller):
    address, token = controller
    with QuotaClient(address, client_id="x" * 2000, token=token) as oversized:
        with pytest.raises(SluiceError) as raised:
            oversized.acquire("py_rate", 1)
    assert raised.value.code == "INVALID_REQUEST" and not raised.value.retriable, raised.value
