"""Signing, patterns and token-bucket arithmetic, pure."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from ingest.triggers import buckets, patterns, signing
from ingest.triggers.errors import BadSignature, StaleTimestamp

pytestmark = pytest.mark.pure
NOW = datetime(2026, 11, 22, 12, 0, tzinfo=UTC)


def test_a_correct_signature_passes() -> None:
    ts = str(int(NOW.timestamp()))
    sig = signing.sign(secret="s3", timestamp=ts, body=b'{"a":1}')
    signing.verify(secrets=["s3"], timestamp=ts, signature=sig, body=b'{"a":1}', now=NOW)


def test_a_signature_over_another_body_fails() -> None:
    ts = str(int(NOW.timestamp()))
    sig = signing.sign(secret="s3", timestamp=ts, body=b'{"a":1}')
    with pytest.raises(BadSignature, match="does not match"):
        signing.verify(secrets=["s3"], timestamp=ts, signature=sig, body=b'{"a":2}', now=NOW)


def test_a_header_of_several_signatures_passes_when_any_one_is_made_with_a_known_secret() -> None:
    ts = str(int(NOW.timestamp()))
    both = signing.sign_all(secrets=["new", "old"], timestamp=ts, body=b"{}")
    assert both == signing.sign(secret="new", timestamp=ts, body=b"{}") + ", " + signing.sign(
        secret="old", timestamp=ts, body=b"{}"
    )
    signing.verify(secrets=["old"], timestamp=ts, signature=both, body=b"{}", now=NOW)
    signing.verify(secrets=["new"], timestamp=ts, signature=both, body=b"{}", now=NOW)
    with pytest.raises(BadSignature, match="does not match"):
        signing.verify(secrets=["other"], timestamp=ts, signature=both, body=b"{}", now=NOW)
    # Only the first few are read: a header of many guesses is not tried in full.
    guesses = ", ".join(
        ["sha256=" + "0" * 64] * signing.MAX_SIGNATURES + [signing.sign(secret="s", timestamp=ts, body=b"{}")]
    )
    with pytest.raises(BadSignature):
        signing.verify(secrets=["s"], timestamp=ts, signature=guesses, body=b"{}", now=NOW)


@pytest.mark.parametrize("offset", [301, -301, 3600])
def test_timestamps_outside_five_minutes_are_refused(offset: int) -> None:
    ts = str(int(NOW.timestamp()) + offset)
    sig = signing.sign(secret="s3", timestamp=ts, body=b"{}")
    with pytest.raises(StaleTimestamp, match="within 300 s"):
        signing.verify(secrets=["s3"], timestamp=ts, signature=sig, body=b"{}", now=NOW)


def test_patterns_are_globs_and_filters_compare_fields() -> None:
    assert patterns.type_matches("user.*", "user.created")
    assert patterns.type_matches("gong.call.*", "gong.call.transcribed")
    assert not patterns.type_matches("user.*", "account.created")
    assert patterns.filters_match({"plan": "pro", "org.size": [10, 20]}, {"plan": "pro", "org": {"size": 20}})
    assert not patterns.filters_match({"plan": "pro"}, {"plan": "free"})
    assert not patterns.filters_match({"plan": None}, {})


def test_the_bucket_refills_and_says_how_long_to_wait() -> None:
    state = buckets.BucketState(capacity=2, refill_per_second=1, tokens=2, updated_at=NOW)
    first = buckets.take(state, cost=1, now=NOW)
    second = buckets.take(first.state, cost=1, now=NOW)
    third = buckets.take(second.state, cost=1, now=NOW)
    assert (first.wait, second.wait) == (0, 0)
    assert third.wait == pytest.approx(1.0)
    later = buckets.take(third.state, cost=1, now=NOW + timedelta(seconds=1))
    assert later.wait == 0
    assert buckets.retry_after_header(0.2) == "1"
