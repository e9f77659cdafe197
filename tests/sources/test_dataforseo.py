from __future__ import annotations

import pickle
import time
from collections.abc import Iterator
from decimal import Decimal

import pytest

from ingest.sources.dataforseo import (
    MAX_SPAM_SCORE_TARGETS,
    DataForSEOClient,
    spam_score_batches,
)
from ingest.sources.dataforseo_errors import (
    DataForSEOAuthError,
    DataForSEONoResults,
    DataForSEOPaymentRequired,
    DataForSEORateLimited,
    DataForSEORequestRejected,
    DataForSEOServerError,
    DataForSEOTooManyTargets,
    DataForSEOUnavailable,
    error_class_for_status,
)
from ingest.sources.http import RateLimiter
from ingest.sources.outbound import InProcess
from ingest.sources.seo_services import (
    DATAFORSEO_BACKLINKS,
    DATAFORSEO_KEYWORDS,
    DATAFORSEO_REFERRING_DOMAINS,
    DATAFORSEO_SPAM_SCORE,
)
from tests.fakes.dataforseo import (
    ROUTE_BACKLINKS,
    ROUTE_KEYWORDS,
    ROUTE_SPAM,
    FakeDataForSEO,
    envelope,
    task_json,
)
from tests.fakes.server import Planned

pytestmark = pytest.mark.pure


class FakeClock:
    def __init__(self) -> None:
        self.now = 0.0
        self.sleeps: list[float] = []

    def __call__(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.sleeps.append(seconds)
        self.now += seconds


@pytest.fixture
def fake() -> Iterator[FakeDataForSEO]:
    with FakeDataForSEO(task_errors={"broke.example": 40200, "busy.example": 40202,
                                     "se-down.example": 40101, "bad.example": 40501,
                                     "inner.example": 50000}) as server:  # fmt: skip
        yield server


def client_for(fake: FakeDataForSEO, clock: FakeClock | None = None, **kwargs: object) -> DataForSEOClient:
    clock = clock or FakeClock()
    kwargs.setdefault("limiter", InProcess(RateLimiter(2000, 60.0, clock=clock, sleep=clock.sleep)))
    kwargs.setdefault("sleep", clock.sleep)
    kwargs.setdefault("login", "dfs-login")
    kwargs.setdefault("password", "dfs-password")
    return DataForSEOClient(base_url=fake.url, **kwargs)  # type: ignore[arg-type]


def test_backlinks_posts_one_task_as_a_json_array_with_basic_auth(fake: FakeDataForSEO) -> None:
    client_for(fake).backlinks("acme.example", limit=25)

    request = fake.requests_to(ROUTE_BACKLINKS)[0]
    assert request.json() == [{"target": "acme.example", "limit": 25, "mode": "as_is"}]
    assert request.header("Authorization") == fake.expected_auth


def test_backlinks_come_back_typed_with_the_cost_the_task_reported(fake: FakeDataForSEO) -> None:
    listing, cost, usage = call = client_for(fake).backlinks("acme.example", limit=40)

    assert len(listing.items) == listing.items_count == 40
    assert listing.target == "acme.example" and listing.total_count >= 40
    first = listing.items[0]
    assert first.url_from.startswith("https://") and first.url_to.startswith("https://acme.example/")
    assert cost == Decimal("0.02") + Decimal("0.00003") * 40 == fake.billed
    assert (usage.service, usage.model, usage.items) == ("dataforseo", "backlinks/backlinks/live", 40)
    assert usage.provider_cost == cost and call.cost_reported and call.cost_service is DATAFORSEO_BACKLINKS


def test_the_same_target_always_gets_the_same_data(fake: FakeDataForSEO) -> None:
    first = client_for(fake).backlinks("acme.example", limit=10).result
    again = client_for(fake).backlinks("acme.example", limit=10).result
    other = client_for(fake).backlinks("globex.example", limit=10).result

    assert first == again and first.items != other.items


def test_track_cost_kwargs_carry_the_seed_service_and_items_count(fake: FakeDataForSEO) -> None:
    call = client_for(fake).ranked_keywords("acme.example", limit=30)

    kwargs = call.track_cost_kwargs()
    assert kwargs["service"] == "dataforseo" and kwargs["cost"] == call.cost
    assert kwargs["items"] == 30 and kwargs["success"] is True
    assert kwargs["metadata"]["cost_service"] == "DATAFORSEO_KEYWORDS"
    assert kwargs["metadata"]["items_count"] == 30 and kwargs["metadata"]["task_id"]


def test_ranked_keywords_and_referring_domains_parse_their_items(fake: FakeDataForSEO) -> None:
    client = client_for(fake)
    keywords = client.ranked_keywords("acme.example", limit=5)
    domains = client.referring_domains("acme.example", limit=7)

    assert keywords.cost_service is DATAFORSEO_KEYWORDS
    assert all(k.keyword and k.url and k.url.startswith("https://acme.example/") for k in keywords.result.items)
    assert fake.requests_to(ROUTE_KEYWORDS)[0].json()[0]["location_code"] == 2840
    assert domains.cost_service is DATAFORSEO_REFERRING_DOMAINS and domains.result.items_count == 7
    assert all(d.domain and d.backlinks >= 1 for d in domains.result.items)


def test_a_payment_error_inside_a_200_is_not_retryable_and_asks_for_an_operator(
    fake: FakeDataForSEO,
) -> None:
    with pytest.raises(DataForSEOPaymentRequired) as raised:
        client_for(fake).backlinks("broke.example")

    error = raised.value
    assert (error.status, error.code, error.retryable, error.needs_operator) == (200, 40200, False, True)
    assert "40200" in str(error) and "operator" in str(error)


def test_a_rate_limit_code_inside_a_200_is_retryable_after_a_minute(fake: FakeDataForSEO) -> None:
    with pytest.raises(DataForSEORateLimited) as raised:
        client_for(fake).backlinks("busy.example")

    assert raised.value.retryable and raised.value.retry_after == 60.0 and raised.value.code == 40202


@pytest.mark.parametrize(
    ("target", "error", "retryable"),
    [("se-down.example", DataForSEOServerError, True), ("inner.example", DataForSEOServerError, True),
     ("bad.example", DataForSEORequestRejected, False)],
)  # fmt: skip
def test_per_task_errors_map_to_their_class(
    fake: FakeDataForSEO, target: str, error: type[Exception], retryable: bool
) -> None:
    with pytest.raises(error) as raised:
        client_for(fake).referring_domains(target)

    assert raised.value.retryable is retryable  # type: ignore[attr-defined]


def test_a_billed_task_error_keeps_its_cost(fake: FakeDataForSEO) -> None:
    task = task_json("backlinks/backlinks/live", {"target": "x.example"}, code=40101,
                     cost=Decimal("0.02"))  # fmt: skip
    fake.plan(ROUTE_BACKLINKS, Planned(200, envelope([task])))

    with pytest.raises(DataForSEOServerError) as raised:
        client_for(fake).backlinks("x.example")

    assert raised.value.cost == Decimal("0.02")


def test_no_search_results_is_an_empty_listing_not_an_error(fake: FakeDataForSEO) -> None:
    task = task_json("dataforseo_labs/google/ranked_keywords/live", {"target": "new.example"},
                     code=40102, cost=Decimal("0.01"))  # fmt: skip
    fake.plan(ROUTE_KEYWORDS, Planned(200, envelope([task])))

    listing, cost, usage = client_for(fake).ranked_keywords("new.example")

    assert listing.items == () and usage.items == 0 and cost == Decimal("0.01")


def test_a_top_level_error_code_is_raised_even_without_tasks(fake: FakeDataForSEO) -> None:
    fake.plan(ROUTE_BACKLINKS, Planned(200, envelope([], code=40000)))

    with pytest.raises(DataForSEORequestRejected, match="40000"):
        client_for(fake).backlinks("acme.example")


def test_wrong_credentials_are_an_auth_error(fake: FakeDataForSEO) -> None:
    with pytest.raises(DataForSEOAuthError) as raised:
        client_for(fake, password="wrong").backlinks("acme.example")

    assert raised.value.status == 401 and not raised.value.retryable


@pytest.mark.parametrize(
    ("status", "error", "retryable"),
    [(402, DataForSEOPaymentRequired, False), (404, DataForSEORequestRejected, False),
     (500, DataForSEOServerError, True)],
)  # fmt: skip
def test_http_errors_map_to_their_class(
    fake: FakeDataForSEO, status: int, error: type[Exception], retryable: bool
) -> None:
    fake.plan(ROUTE_BACKLINKS, Planned(status, {"status_code": status * 100, "status_message": "x"}))

    with pytest.raises(error) as raised:
        client_for(fake).backlinks("acme.example")

    assert raised.value.status == status and raised.value.retryable is retryable  # type: ignore[attr-defined]


def test_a_429_is_resent_after_its_retry_after(fake: FakeDataForSEO) -> None:
    clock = FakeClock()
    fake.plan(ROUTE_BACKLINKS, Planned(429, "slow down", {"Retry-After": "3"}))

    listing = client_for(fake, clock).backlinks("acme.example", limit=3).result

    assert listing.items_count == 3 and clock.sleeps == [3.0]
    assert fake.count(ROUTE_BACKLINKS) == 2


def test_a_long_or_repeated_429_is_handed_to_the_engine_with_retry_after(fake: FakeDataForSEO) -> None:
    fake.plan(ROUTE_BACKLINKS, Planned(429, "slow down", {"Retry-After": "120"}))

    with pytest.raises(DataForSEORateLimited) as raised:
        client_for(fake).backlinks("acme.example")

    assert raised.value.retry_after == 120.0 and raised.value.retryable
    assert fake.count(ROUTE_BACKLINKS) == 1


def test_an_unreachable_server_is_retryable() -> None:
    fake = FakeDataForSEO().start()
    url = fake.url
    fake.stop()

    client = DataForSEOClient(login="l", password="p", base_url=url,
                              limiter=InProcess(RateLimiter(10)))  # fmt: skip
    with pytest.raises(DataForSEOUnavailable) as raised:
        client.backlinks("acme.example")
    assert raised.value.retryable


def test_spam_scores_for_up_to_a_thousand_targets_in_one_call(fake: FakeDataForSEO) -> None:
    targets = [f"site{i}.example" for i in range(MAX_SPAM_SCORE_TARGETS)]

    scores, cost, usage = client_for(fake).bulk_spam_score(targets)

    assert [s.target for s in scores.items] == targets and usage.items == 1000
    assert all(0 <= (s.spam_score or 0) <= 60 for s in scores.items)
    assert cost == Decimal("0.02") == fake.billed  # the seed's ~$0.02 per 1,000
    assert fake.requests_to(ROUTE_SPAM)[0].json() == [{"targets": targets}]


def test_more_than_a_thousand_spam_targets_are_refused_before_any_request(
    fake: FakeDataForSEO,
) -> None:
    with pytest.raises(DataForSEOTooManyTargets, match="1001 targets.*spam_score_batches"):
        client_for(fake).bulk_spam_score([f"s{i}.example" for i in range(1001)])

    assert fake.count() == 0


def test_spam_score_batches_cut_at_a_thousand_and_keep_order() -> None:
    targets = [f"s{i}" for i in range(2500)]

    batches = spam_score_batches(targets)

    assert [len(b) for b in batches] == [1000, 1000, 500]
    assert [t for b in batches for t in b] == targets


@pytest.mark.parametrize(
    ("code", "expected"),
    [(20000, None), (20100, None), (40000, DataForSEORequestRejected),
     (40100, DataForSEOAuthError), (40101, DataForSEOServerError), (40102, DataForSEONoResults),
     (40200, DataForSEOPaymentRequired), (40201, DataForSEOPaymentRequired),
     (40204, DataForSEOPaymentRequired), (40202, DataForSEORateLimited),
     (40209, DataForSEORateLimited), (40400, DataForSEORequestRejected),
     (40501, DataForSEORequestRejected), (50000, DataForSEOServerError),
     (50301, DataForSEOServerError), (60000, DataForSEOServerError)],
)  # fmt: skip
def test_every_status_class_maps_to_an_error(code: int, expected: type[Exception] | None) -> None:
    assert error_class_for_status(code) is expected


def test_errors_keep_code_and_cost_across_processes() -> None:
    error = DataForSEOPaymentRequired("no money", status=200, code=40200, cost=Decimal("0.5"))

    copy = pickle.loads(pickle.dumps(error))

    assert (type(copy), copy.code, copy.cost, copy.needs_operator) == (
        DataForSEOPaymentRequired,
        40200,
        Decimal("0.5"),
        True,
    )


def test_the_fake_answers_each_target_within_its_latency_and_the_same_each_time() -> None:
    with FakeDataForSEO(latency=(0.2, 0.4)) as slow:
        client = client_for(slow)
        planned = slow._delay("acme.example")
        took = []
        for _ in range(2):
            started = time.monotonic()
            client.backlinks("acme.example", limit=1)
            took.append(time.monotonic() - started)

    # The latency is a function of the target, in the range asked for; each answer waited it out.
    # Lower bounds only: a busy machine adds to a wait, it never shortens one.
    assert 0.2 <= planned < 0.4
    assert planned == slow._delay("acme.example") != slow._delay("globex.example")
    assert all(t >= planned for t in took)


def test_estimates_reserve_the_seed_prices_before_a_call() -> None:
    assert DATAFORSEO_SPAM_SCORE.estimate(items=1000) == Decimal("0.02")
    assert DATAFORSEO_BACKLINKS.estimate(items=100) == Decimal("0.023")


def test_the_fake_enforces_its_per_minute_limit_with_429s() -> None:
    with FakeDataForSEO(calls_per_minute=2) as limited:
        client = client_for(limited, max_rate_limit_retries=0)
        client.backlinks("a.example", limit=1)
        client.backlinks("b.example", limit=1)
        with pytest.raises(DataForSEORateLimited) as raised:
            client.backlinks("c.example", limit=1)

    assert 58 <= (raised.value.retry_after or 0) <= 60 and raised.value.status == 429


def test_an_answer_without_a_status_code_is_a_retryable_server_error(fake: FakeDataForSEO) -> None:
    fake.plan(ROUTE_BACKLINKS, Planned(200, {"tasks": []}))

    with pytest.raises(DataForSEOServerError, match="without a status_code"):
        client_for(fake).backlinks("acme.example")


def test_a_spam_score_task_error_names_how_many_targets_it_had(fake: FakeDataForSEO) -> None:
    task = task_json("backlinks/bulk_spam_score/live", {"targets": ["a"]}, code=40200)
    fake.plan(ROUTE_SPAM, Planned(200, envelope([task])))

    with pytest.raises(DataForSEOPaymentRequired, match="'3 targets'"):
        client_for(fake).bulk_spam_score(["a.example", "b.example", "c.example"])
