from __future__ import annotations

import pickle
import threading
from collections.abc import Iterator
from decimal import Decimal

import pytest

from ingest.sources.page_fetch import FetchResult, blocked_reason, next_method
from ingest.sources.seo_services import ZENROWS_BASIC, ZENROWS_PREMIUM
from ingest.sources.zenrows import (
    NativeFetcher,
    ZenRowsAuthError,
    ZenRowsBlocked,
    ZenRowsClient,
    ZenRowsCouldNotFetch,
    ZenRowsPaymentRequired,
    ZenRowsRateLimited,
    ZenRowsRequestRejected,
    ZenRowsServerError,
    ZenRowsTargetGone,
    ZenRowsUnavailable,
    error_for_code,
    fetch_cascade,
)
from tests.fakes.server import Planned
from tests.fakes.zenrows import CHALLENGE, ROUTE_API, ROUTE_SITE, FakeZenRows, error_body

pytestmark = pytest.mark.pure


@pytest.fixture
def fake() -> Iterator[FakeZenRows]:
    with FakeZenRows(protected={"shielded.example"}, premium_only={"fortress.example"},
                     gone={"vanished.example"}) as server:  # fmt: skip
        yield server


def client_for(fake: FakeZenRows, **kwargs: object) -> ZenRowsClient:
    sleeps: list[float] = []
    kwargs.setdefault("api_key", "zr-key")
    kwargs.setdefault("sleep", sleeps.append)
    return ZenRowsClient(base_url=f"{fake.url}/v1/", **kwargs)  # type: ignore[arg-type]


def test_it_sends_the_key_the_url_and_the_tier_options(fake: FakeZenRows) -> None:
    client_for(fake).fetch("https://acme.example/pricing", js_render=True, premium_proxy=True)

    query = fake.requests_to(ROUTE_API)[0].query
    assert query == {"apikey": ["zr-key"], "url": ["https://acme.example/pricing"],
                     "js_render": ["true"], "premium_proxy": ["true"]}  # fmt: skip


def test_basic_is_costed_from_the_request_cost_header(fake: FakeZenRows) -> None:
    page, cost, usage = call = client_for(fake).fetch("https://acme.example/blog/post")

    assert page.ok and page.method == "zenrows_basic" and "<h1>" in page.html
    assert page.final_url == "https://acme.example/blog/post"
    assert cost == Decimal("0.001") == fake.billed and call.cost_reported
    assert (usage.service, usage.model, usage.items) == ("zenrows", "basic", 1)
    assert call.cost_service is ZENROWS_BASIC and call.metadata["request_id"]


def test_premium_is_its_own_cost_service(fake: FakeZenRows) -> None:
    call = client_for(fake).fetch("https://acme.example/", premium_proxy=True)

    assert call.cost_service is ZENROWS_PREMIUM and call.cost == Decimal("0.01")
    assert call.track_cost_kwargs()["metadata"]["cost_service"] == "ZENROWS_PREMIUM"


def test_an_answer_without_a_cost_header_is_priced_at_the_fallback(fake: FakeZenRows) -> None:
    fake.plan(ROUTE_API, Planned(200, "<html><title>x</title></html>"))

    call = client_for(fake).fetch("https://acme.example/")

    assert call.cost == Decimal("0.001") and not call.cost_reported
    assert call.track_cost_kwargs()["metadata"]["cost_reported"] is False


@pytest.mark.parametrize(
    ("status", "code", "error", "retryable", "operator"),
    [(401, "AUTH002", ZenRowsAuthError, False, False),
     (402, "AUTH004", ZenRowsPaymentRequired, False, True),
     (402, "AUTH010", ZenRowsPaymentRequired, False, True),
     (403, "BLK0001", ZenRowsBlocked, False, True),
     (400, "REQS004", ZenRowsRequestRejected, False, False),
     (404, "RESP002", ZenRowsTargetGone, False, False),
     (422, "RESP001", ZenRowsCouldNotFetch, True, False),
     (424, "RESP006", ZenRowsCouldNotFetch, True, False),
     (502, "RESP003", ZenRowsServerError, True, False),
     (504, "CTX0002", ZenRowsUnavailable, True, False)],
)  # fmt: skip
def test_every_error_code_maps_to_retryable_or_not(
    fake: FakeZenRows,
    status: int,
    code: str,
    error: type[Exception],
    retryable: bool,
    operator: bool,
) -> None:
    fake.plan(ROUTE_API, Planned(status, error_body(code, status)))

    with pytest.raises(error) as raised:
        client_for(fake).fetch("https://acme.example/")

    found = raised.value
    assert (found.code, found.status, found.retryable, found.needs_operator) == (  # type: ignore[attr-defined]
        code,
        status,
        retryable,
        operator,
    )
    assert code in str(found) and fake.billed == 0


def test_a_wrong_key_is_refused_by_the_fake_as_zenrows_does(fake: FakeZenRows) -> None:
    with pytest.raises(ZenRowsAuthError, match="AUTH002"):
        client_for(fake, api_key="nope").fetch("https://acme.example/")


def test_a_429_is_resent_after_retry_after_then_handed_on(fake: FakeZenRows) -> None:
    sleeps: list[float] = []
    fake.plan(ROUTE_API, Planned(429, error_body("AUTH006", 429), {"Retry-After": "2"}))

    assert client_for(fake, sleep=sleeps.append).fetch("https://acme.example/").result.ok
    assert sleeps == [2.0]

    fake.plan(ROUTE_API, *[Planned(429, error_body("AUTH008", 429), {"Retry-After": "30"})])
    with pytest.raises(ZenRowsRateLimited) as raised:
        client_for(fake).fetch("https://acme.example/")
    assert raised.value.retry_after == 30.0 and raised.value.code == "AUTH008"


def test_unknown_codes_fall_back_on_the_http_status() -> None:
    assert error_for_code("NEW999", 503) is ZenRowsServerError
    assert error_for_code("", 418) is ZenRowsRequestRejected
    assert error_for_code("", 429) is ZenRowsRateLimited


def test_errors_keep_their_code_across_processes() -> None:
    copy = pickle.loads(pickle.dumps(ZenRowsPaymentRequired("x", code="AUTH004", status=402)))

    assert (type(copy), copy.code, copy.status, copy.needs_operator) == (ZenRowsPaymentRequired, "AUTH004", 402, True)


def test_the_cascade_stops_at_a_free_native_fetch_when_it_works(fake: FakeZenRows) -> None:
    result = fetch_cascade(fake.site_url("acme.example", "/docs/start"), native=NativeFetcher(),
                           zenrows=client_for(fake))  # fmt: skip

    assert result.method == "native" and result.cost == 0 and result.paid == ()
    assert fake.count(ROUTE_API) == 0 and result.page is not None and "<h1>" in result.page.html


def test_a_blocked_native_fetch_escalates_to_zenrows_basic(fake: FakeZenRows) -> None:
    url = fake.site_url("shielded.example", "/pricing")

    result = fetch_cascade(url, native=NativeFetcher(), zenrows=client_for(fake))

    assert [a.method for a in result.attempts] == ["native", "zenrows_basic"]
    assert result.attempts[0].blocked == "captcha" and result.attempts[0].status == 403
    assert result.method == "zenrows_basic" and result.cost == Decimal("0.001")
    assert result.page is not None and "$49/month" in result.page.html


def test_what_basic_cannot_fetch_goes_to_premium_and_both_tiers_are_accounted(
    fake: FakeZenRows,
) -> None:
    url = fake.site_url("fortress.example", "/")

    result = fetch_cascade(url, native=NativeFetcher(), zenrows=client_for(fake))

    assert [a.method for a in result.attempts] == ["native", "zenrows_basic", "zenrows_premium"]
    assert result.attempts[1].blocked == "zenrows_failed" and "RESP001" in result.attempts[1].error
    assert [c.cost_service.name for c in result.paid] == ["ZENROWS_PREMIUM"]
    assert result.cost == Decimal("0.01") == fake.billed


def test_a_domain_known_to_need_premium_starts_there(fake: FakeZenRows) -> None:
    result = fetch_cascade(fake.site_url("fortress.example"), native=NativeFetcher(),
                           zenrows=client_for(fake), start="zenrows_premium")  # fmt: skip

    assert [a.method for a in result.attempts] == ["zenrows_premium"]
    assert fake.count(ROUTE_SITE) == 0


def test_a_page_that_does_not_exist_is_not_paid_for(fake: FakeZenRows) -> None:
    result = fetch_cascade(fake.site_url("vanished.example", "/old"), native=NativeFetcher(),
                           zenrows=client_for(fake))  # fmt: skip

    assert result.page is None and [a.status for a in result.attempts] == [404]
    assert fake.count(ROUTE_API) == 0


def test_without_zenrows_the_cascade_ends_after_native(fake: FakeZenRows) -> None:
    result = fetch_cascade(fake.site_url("shielded.example"), native=NativeFetcher(), zenrows=None)

    assert result.page is None and len(result.attempts) == 1


def test_payment_errors_stop_the_cascade_for_an_operator(fake: FakeZenRows) -> None:
    fake.plan(ROUTE_API, Planned(402, error_body("AUTH004", 402)))

    with pytest.raises(ZenRowsPaymentRequired):
        fetch_cascade(fake.site_url("shielded.example"), native=NativeFetcher(),
                      zenrows=client_for(fake))  # fmt: skip


@pytest.mark.parametrize(
    ("status", "html", "headers", "reason"),
    [(200, "<html><title>Docs</title><p>" + "words " * 200 + "</p></html>", {}, None),
     (403, CHALLENGE, {}, "captcha"),
     (200, "<html><head><title>Attention Required! | Cloudflare</title></head></html>", {}, "captcha"),
     (503, "<html>…</html>", {"cf-mitigated": "challenge"}, "captcha"),
     (200, '<div id="px-captcha"></div>', {}, "captcha"),
     (429, "Too many requests", {}, "rate_limited"),
     (403, "<html><title>Forbidden</title></html>", {}, "forbidden"),
     (200, "<html><body><noscript>You need to enable JavaScript to run this app.</noscript>"
           '<div id="root"></div></body></html>', {}, "needs_javascript"),
     (200, '<form><div class="g-recaptcha"></div><input type="password"></form>'
           + "<p>" + "text " * 200 + "</p>", {}, None),
     (404, "<html><title>Not found</title></html>", {}, None)],
)  # fmt: skip
def test_blocked_detection(status: int, html: str, headers: dict[str, str], reason: str | None) -> None:
    assert blocked_reason(status, html, headers) == reason


@pytest.mark.parametrize(
    ("method", "status", "blocked", "expected"),
    [("native", 200, None, None), ("native", 403, "captcha", "zenrows_basic"),
     ("native", 0, "unreachable", "zenrows_basic"), ("native", 404, None, None),
     ("native", 500, None, "zenrows_basic"), ("zenrows_basic", 422, "zenrows_failed", "zenrows_premium"),
     ("zenrows_premium", 422, "zenrows_failed", None)],
)  # fmt: skip
def test_next_method_escalates_only_past_blocks_and_failures(
    method: str, status: int, blocked: str | None, expected: str | None
) -> None:
    result = FetchResult(url="https://a.example/", method=method, status=status, blocked=blocked)  # type: ignore[arg-type]

    assert next_method(result) == expected


def test_the_fake_refuses_requests_past_its_concurrency_with_auth006() -> None:
    with FakeZenRows(concurrency=1, latency=(0.4, 0.4)) as busy:
        client = client_for(busy, max_rate_limit_retries=0)
        outcomes: list[object] = []

        def fetch(path: str) -> None:
            try:
                outcomes.append(client.fetch(f"https://acme.example/{path}").cost)
            except ZenRowsRateLimited as error:
                outcomes.append(error.code)

        threads = [threading.Thread(target=fetch, args=(p,)) for p in ("a", "b")]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()

    assert sorted(map(str, outcomes)) == ["0.001000", "AUTH006"]
