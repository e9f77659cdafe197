"""The DataForSEO lookup cache: re-onboarding a domain inside the cache's lifetime pays nothing for
what DataForSEO already answered (a zero-cost row marked as a cache hit, what it saved), the
domain's cost page counts the hits and the money saved, an expired answer is fetched again, one
tenant never reads another's answers, and a step retried after a crash books its real cost."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import timedelta
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest
from django.db.models import Sum
from django.test import Client

from dashboard.access import demo_users_ensure
from ingest.engine import create, get
from ingest.engine.clock import clock
from ingest.engine.models import ApiCost, Instance
from ingest.rankdisco.answer_cache import TenantAnswerCache
from ingest.rankdisco.models import DataForSEOAnswer, Domain
from ingest.sources.dataforseo import DataForSEOClient
from ingest.sources.http import RateLimiter
from ingest.sources.outbound import InProcess
from ingest.sources.zenrows import NativeFetcher, ZenRowsClient
from ingest.workflows.domain_onboard import OnboardClients, clients_install, domain_onboard_start
from tests.engine.e2e_paid_workflows import crash_and_take_over
from tests.fakes.dataforseo import ROUTE_BACKLINKS, FakeDataForSEO
from tests.fakes.zenrows import FakeZenRows
from tests.rankdisco.conftest import SiteSession

pytestmark = [pytest.mark.db, pytest.mark.django_db(transaction=True)]

SMALL = {"backlink_limit": 10, "keyword_limit": 10, "referring_domains_limit": 10}
ENDPOINTS = 4  # backlinks, ranked keywords, referring domains, bulk spam score


@pytest.fixture
def cached_clients(dataforseo: FakeDataForSEO, zenrows: FakeZenRows) -> Iterator[OnboardClients]:
    made = OnboardClients(
        dataforseo=DataForSEOClient(
            login="dfs-login",
            password="dfs-password",
            base_url=dataforseo.url,
            limiter=InProcess(RateLimiter(1000)),
            cache=TenantAnswerCache(),
        ),
        native=NativeFetcher(session=SiteSession(zenrows)),
        zenrows=ZenRowsClient(api_key="zr-key", base_url=f"{zenrows.url}/v1/"),
    )
    clients_install(lambda: made)
    yield made
    clients_install(None)


def onboard(drain: Any, tenant: str = "acme", run: str = "") -> str:
    iid, created = domain_onboard_start(tenant, "acme.example", run=run, **SMALL)
    assert created
    drain()
    assert get(iid).status()["status"] == "complete"
    return iid


def dataforseo_rows(iid: str) -> Any:
    return ApiCost.objects.filter(instance_id=iid, service="dataforseo")


def test_re_onboarding_inside_the_lifetime_pays_nothing_for_what_it_has_and_the_cost_page_says_so(
        cached_clients, dataforseo: FakeDataForSEO, drain) -> None:  # fmt: skip
    first = onboard(drain)
    paid = dataforseo.count()
    assert paid == ENDPOINTS
    spent = dataforseo_rows(first).aggregate(t=Sum("cost"))["t"]
    assert spent == dataforseo.billed > 0

    second = onboard(drain, run="2")
    assert dataforseo.count() == paid  # no call
    hits = dataforseo_rows(second)
    assert hits.count() == ENDPOINTS
    assert all(row.cost == 0 and row.metadata["cache_hit"] is True for row in hits)
    assert sum(Decimal(row.metadata["saved"]) for row in hits) == spent

    demo_users_ensure()
    viewer = Client()
    assert viewer.login(username="viewer", password="viewer")
    domain = Domain.objects.get(tenant="acme", name="acme.example")
    page = viewer.get(f"/domains/{domain.id}/")
    detail = page.context["d"]
    assert (detail.cache_hits, detail.cache_saved) == (ENDPOINTS, spent)
    assert sum(c["hits"] for c in detail.cost_by_stage) == ENDPOINTS
    text = page.content.decode()
    assert f"Cache hits: {ENDPOINTS} DataForSEO calls answered from the cache" in text
    assert f"${spent.quantize(Decimal('0.0001'))} saved" in text


def test_an_expired_answer_is_fetched_again_and_kept_anew(cached_clients, dataforseo: FakeDataForSEO, drain) -> None:
    onboard(drain)
    kept = dict(DataForSEOAnswer.objects.values_list("endpoint", "expires_at"))
    clock.advance(timedelta(hours=24, seconds=1))  # past the default lifetime
    try:
        again = onboard(drain, run="2")
    finally:
        clock.advance(-timedelta(hours=24, seconds=1))
    assert dataforseo.count() == 2 * ENDPOINTS
    assert not dataforseo_rows(again).filter(metadata__cache_hit=True).exists()
    assert dataforseo_rows(again).aggregate(t=Sum("cost"))["t"] > 0
    refreshed = dict(DataForSEOAnswer.objects.values_list("endpoint", "expires_at"))
    assert refreshed.keys() == kept.keys() and all(refreshed[e] > kept[e] for e in kept)


def test_one_tenant_never_reads_anothers_answers(cached_clients, dataforseo: FakeDataForSEO, drain) -> None:
    onboard(drain, tenant="acme")
    other = onboard(drain, tenant="globex")
    assert dataforseo.count() == 2 * ENDPOINTS
    assert not dataforseo_rows(other).filter(metadata__cache_hit=True).exists()


def test_a_lifetime_of_zero_turns_the_cache_off(cached_clients, dataforseo: FakeDataForSEO, drain, settings) -> None:
    settings.RUNLEDGER_DATAFORSEO_CACHE_HOURS = 0
    onboard(drain)
    onboard(drain, run="2")
    assert dataforseo.count() == 2 * ENDPOINTS
    assert not DataForSEOAnswer.objects.exists()


def test_a_step_retried_after_a_crash_books_its_real_cost_not_a_cache_hit(
        dataforseo: FakeDataForSEO, zenrows: FakeZenRows, drain, tmp_path: Path) -> None:  # fmt: skip
    # The lost run put its answer in the cache; its retry replays the answer from the step's
    # journal and books what it cost. Another instance asking the same then hits the cache.
    params = {
        "llm_url": "",
        "dfs_url": dataforseo.url,
        "zr_url": zenrows.url,
        "marks": str(tmp_path),
        "how": "exit",
        "steps": ["dataforseo"],
        "cache": True,
    }
    lost = create(
        id="cache-crash", workflow="e2e-paid", params={**params, "die": {"dataforseo": "answer"}}, tenant="acme"
    ).id
    crash_and_take_over(drain, lost)
    drain()
    assert get(lost).status()["status"] == "complete"
    [row] = ApiCost.objects.filter(instance_id=lost)
    assert row.cost == dataforseo.billed > 0 and "cache_hit" not in row.metadata
    later = create(id="cache-later", workflow="e2e-paid", params=params, tenant="acme").id
    drain()
    [hit] = ApiCost.objects.filter(instance_id=later)
    assert hit.cost == 0 and hit.metadata["cache_hit"] is True and Decimal(hit.metadata["saved"]) == row.cost
    assert dataforseo.count(ROUTE_BACKLINKS) == 1
    assert Instance.objects.filter(status="complete").count() == 2
