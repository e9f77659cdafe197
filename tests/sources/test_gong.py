from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from ingest.demo.corpus import demo_calls
from ingest.sources.gong import (
    GongAuthError,
    GongClient,
    GongRateLimited,
    GongServerError,
    RateLimiter,
)
from ingest.sources.outbound import InProcess
from tests.fakes import FakeGong, Planned

pytestmark = pytest.mark.pure

START = datetime(2025, 3, 1, tzinfo=UTC)
END = datetime(2025, 4, 1, tzinfo=UTC)


class FakeClock:
    def __init__(self) -> None:
        self.now = 0.0
        self.sleeps: list[float] = []

    def __call__(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.sleeps.append(seconds)
        self.now += seconds


def client_for(fake: FakeGong, clock: FakeClock | None = None, **kwargs: object) -> GongClient:
    clock = clock or FakeClock()
    kwargs.setdefault("limiter", InProcess(RateLimiter(3, 1.0, clock=clock, sleep=clock.sleep)))
    kwargs.setdefault("sleep", clock.sleep)
    return GongClient(access_key="gong-key", access_key_secret="gong-secret", base_url=fake.url, **kwargs)  # type: ignore[arg-type]


def test_it_follows_the_cursor_until_the_last_page(fake_gong: FakeGong) -> None:
    calls = list(client_for(fake_gong).iter_calls(from_time=START, to_time=END))

    assert [c.id for c in calls] == [c.id for c in fake_gong.calls]
    assert fake_gong.count("GET /v2/calls") == 3  # 5 calls, pages of 2
    cursors = [r.query.get("cursor") for r in fake_gong.requests_to("GET /v2/calls")]
    assert cursors[0] is None and all(cursors[1:])


def test_it_keeps_call_ids_as_strings_and_parses_metadata(fake_gong: FakeGong) -> None:
    first = next(client_for(fake_gong).iter_calls(from_time=START, to_time=END))

    assert isinstance(first.id, str) and len(first.id) == 19
    assert first.started == fake_gong.calls[0].started
    assert first.title == fake_gong.calls[0].title


def test_it_sends_the_range_as_iso_8601(fake_gong: FakeGong) -> None:
    list(client_for(fake_gong).iter_calls(from_time=START, to_time=END))

    query = fake_gong.requests_to("GET /v2/calls")[0].query
    assert query["fromDateTime"] == ["2025-03-01T00:00:00+00:00"]
    assert query["toDateTime"] == ["2025-04-01T00:00:00+00:00"]


def test_a_range_without_calls_is_empty_not_an_error(fake_gong: FakeGong) -> None:
    calls = list(client_for(fake_gong).iter_calls(from_time=END, to_time=END + timedelta(days=1)))

    assert calls == []


def test_it_refuses_naive_datetimes(fake_gong: FakeGong) -> None:
    with pytest.raises(ValueError, match="timezone-aware"):
        client_for(fake_gong).calls_page(from_time=datetime(2025, 3, 1), to_time=END)


def test_it_honours_retry_after_on_429_and_then_succeeds(fake_gong: FakeGong) -> None:
    fake_gong.plan("GET /v2/calls", Planned(429, {"errors": ["Too many"]}, {"Retry-After": "2"}))
    clock = FakeClock()

    page = client_for(fake_gong, clock).calls_page(from_time=START, to_time=END)

    assert len(page.items) == 2
    assert clock.sleeps == [2.0]
    assert fake_gong.count("GET /v2/calls") == 2


def test_it_raises_a_retryable_error_with_retry_after_when_429s_persist(
    fake_gong: FakeGong,
) -> None:
    throttled = Planned(429, {"errors": ["Too many"]}, {"Retry-After": "5"})
    fake_gong.plan("GET /v2/calls", *[throttled] * 4)

    with pytest.raises(GongRateLimited) as caught:
        client_for(fake_gong, max_rate_limit_retries=3).calls_page(from_time=START, to_time=END)

    assert caught.value.retryable and caught.value.retry_after == 5.0
    assert fake_gong.count("GET /v2/calls") == 4


def test_a_long_retry_after_goes_to_the_engine_instead_of_blocking(fake_gong: FakeGong) -> None:
    fake_gong.plan("GET /v2/calls", Planned(429, {"errors": ["Too many"]}, {"Retry-After": "120"}))

    with pytest.raises(GongRateLimited) as caught:
        client_for(fake_gong, max_inline_wait=30).calls_page(from_time=START, to_time=END)

    assert caught.value.retry_after == 120.0
    assert fake_gong.count("GET /v2/calls") == 1


def test_a_server_error_is_retryable(fake_gong: FakeGong) -> None:
    fake_gong.plan("POST /v2/calls/transcript", Planned(503, "upstream unavailable"))

    with pytest.raises(GongServerError) as caught:
        client_for(fake_gong).transcript(fake_gong.calls[0].id)

    assert caught.value.retryable and caught.value.status == 503
    assert "HTTP 503" in str(caught.value) and "retry later" in str(caught.value)


def test_wrong_credentials_are_not_retryable(fake_gong: FakeGong) -> None:
    client = GongClient(access_key="gong-key", access_key_secret="wrong", base_url=fake_gong.url)

    with pytest.raises(GongAuthError) as caught:
        client.calls_page(from_time=START, to_time=END)

    assert not caught.value.retryable and caught.value.status == 401


def test_it_fetches_transcripts_by_call_id_with_speakers(fake_gong: FakeGong) -> None:
    call = fake_gong.calls[1]
    client = client_for(fake_gong)

    transcript = client.transcript(call.id)
    extensive = next(client.iter_extensive([call.id]))

    assert transcript is not None and transcript.call_id == call.id
    assert transcript.as_text(extensive.parties) == call.transcript_text()
    body = fake_gong.requests_to("POST /v2/calls/transcript")[0].json()
    assert body == {"filter": {"callIds": [call.id]}}


def test_extensive_asks_for_parties_and_content(fake_gong: FakeGong) -> None:
    call = fake_gong.calls[0]
    result = next(client_for(fake_gong).iter_extensive([call.id]))

    selector = fake_gong.requests_to("POST /v2/calls/extensive")[0].json()["contentSelector"]
    assert selector["exposedFields"]["parties"] is True
    assert selector["exposedFields"]["content"]["trackers"] is True
    assert {p.affiliation for p in result.parties} == {"Internal", "External"}
    assert result.call.id == call.id and result.content["brief"]


def test_transcripts_follow_cursor_pages_in_the_body() -> None:
    calls = demo_calls(count=5)
    with FakeGong(calls, page_size=2) as fake:
        transcripts = list(client_for(fake).iter_transcripts([c.id for c in calls]))

        assert [t.call_id for t in transcripts] == [c.id for c in calls]
        assert [r.json().get("cursor") is None for r in fake.requests_to("POST /v2/calls/transcript")] == [
            True,
            False,
            False,
        ]


def test_it_spaces_requests_to_three_per_second(fake_gong: FakeGong) -> None:
    clock = FakeClock()
    client = client_for(fake_gong, clock)

    for _ in range(7):
        client.calls_page(from_time=START, to_time=END)

    assert clock.sleeps == [1.0, 1.0]  # requests 4 and 7 wait for a free slot
    assert clock.now == 2.0
