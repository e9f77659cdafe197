"""domain-onboard end to end through the real engine against the fake DataForSEO and ZenRows."""

from __future__ import annotations

from decimal import Decimal

import pytest

from ingest.engine import InvalidParams, get
from ingest.engine.models import ApiCost, ApprovalRequest, Budget, FanOutItem, Instance
from ingest.engine.services.approvals import approval_answer
from ingest.engine.services.budgets import budget_upsert
from ingest.engine.services.control import instance_resume
from ingest.rankdisco.models import Backlink, BrandProperty, Domain, RankedKeyword, ReferringDomain
from ingest.workflows.domain_onboard import domain_onboard_start
from ingest.workflows.domain_onboard.workflow import CLASSIFY_PACK
from tests.fakes.dataforseo import (
    ROUTE_BACKLINKS,
    ROUTE_KEYWORDS,
    FakeDataForSEO,
    backlink,
    envelope,
    ranked_keyword,
    referring_domain,
    task_json,
)
from tests.fakes.server import Planned

# all_settled runs the fetches in threads, on connections of their own: rows must be committed.
pytestmark = [pytest.mark.db, pytest.mark.django_db(transaction=True)]


def distinct(target: str, count: int = 100) -> tuple[int, int]:
    """How many different keywords and referring domains the fake lists for `target`: its
    data repeats some, and a row is stored once per key."""
    keywords = {ranked_keyword(target, i)["keyword_data"]["keyword"] for i in range(count)}
    return len(keywords), len({referring_domain(target, i)["domain"] for i in range(count)})


SMALL = {"backlink_limit": 10, "keyword_limit": 10, "referring_domains_limit": 10}


def step_names(instance_id: str) -> list[str]:
    return [s["name"] for s in get(instance_id).status()["steps"]]


def test_a_domain_is_fetched_stored_scored_searched_for_brand_properties_and_its_urls_classified(
    onboard_clients, dataforseo: FakeDataForSEO, drain
) -> None:
    iid, created = domain_onboard_start("acme", "https://www.Acme.example/", actor="ana")
    assert created and iid == "onboard-acme-acme-example"
    drain()
    status = get(iid).status()
    assert status["status"] == "complete", status
    metrics = status["output"]["metrics"]
    assert status["output"]["errors"] == []
    assert metrics["backlinks_fetched"] == metrics["keywords_fetched"] == metrics["referring_domains_fetched"] == 100
    assert metrics["ranking_urls_spam_scores"] > 0 and metrics["brand_properties_found"] > 0
    assert metrics["youtube_channels_resolved"] >= 1
    names = step_names(iid)
    assert names[:4] == ["search-attributes", "ensure-domain", "search-attributes", "initialize"]
    assert set(names[4:7]) == {"fetch-backlinks", "fetch-keywords", "fetch-referring-domains"}
    # Without an LLM connection the keywords' intents are the rules' alone: no keyword-intent-llm step.
    assert names[7:] == [
        "parallel-store-all",
        "track-all-queued",
        "fetch-ranking-url-spam-scores",
        "discover-ranking-domain-properties",
        "keyword-intent-rules",
        "finalize",
        "queue-domain-classification",
        "store-classifications",
    ]

    domain = Domain.objects.get(tenant="acme", name="acme.example")
    assert domain.onboard_status == "completed" and domain.onboard_duration_ms is not None
    keywords, referring = distinct("acme.example")
    assert (domain.backlinks_count, domain.keywords_count, domain.referring_domains_count) == (100, keywords, referring)
    assert Backlink.objects.filter(domain=domain).count() == 100
    assert ReferringDomain.objects.filter(domain=domain).count() == referring
    assert RankedKeyword.objects.filter(domain=domain, url_spam_score__isnull=False).count() == keywords
    assert BrandProperty.objects.filter(domain=domain, kind="youtube_channel").exists()
    # Every URL went through url-classify and its result came back onto its row and the domain.
    urls = {backlink("acme.example", i)["url_from"] for i in range(100)} | {
        ranked_keyword("acme.example", i)["ranked_serp_element"]["serp_item"]["url"] for i in range(100)
    }
    # URLs packed CLASSIFY_PACK to a url-classify carrier instance, each URL's stages its own steps
    carriers = Instance.objects.filter(parent_id=iid, workflow="url-classify")
    assert carriers.count() == -(-len(urls) // CLASSIFY_PACK)
    assert FanOutItem.objects.filter(fan_out__instance_id=iid, state="complete").count() == len(urls)
    assert not Backlink.objects.filter(domain=domain, classification__isnull=True).exists()
    by_source = {k: v for k, v in domain.metrics.items() if k.startswith("classified_by_")}
    assert sum(by_source.values()) == len(urls) and by_source.get("classified_by_llm", 0) > 0
    assert domain.metrics["llm_verified_count"] == by_source["classified_by_llm"]
    assert metrics["backlinks_classified"] == len(
        set(Backlink.objects.filter(domain=domain).values_list("url_from", flat=True))
    )

    # One api_costs row per DataForSEO call, as the fake billed it, with the seed's services.
    rows = ApiCost.objects.filter(instance_id=iid, service="dataforseo")
    assert sorted(r.metadata["cost_service"] for r in rows) == [
        "DATAFORSEO_BACKLINKS",
        "DATAFORSEO_KEYWORDS",
        "DATAFORSEO_REFERRING_DOMAINS",
        "DATAFORSEO_SPAM_SCORE",
    ]
    assert {r.metadata["domain"] for r in rows} == {"acme.example"}
    assert {r.metadata["stage"] for r in rows} == {"backlinks", "keywords", "referring_domains", "spam_scores"}
    assert sum(r.cost for r in rows) == dataforseo.billed
    assert domain.cost_usd == sum(r.cost for r in ApiCost.objects.filter(instance_id=iid)) + Decimal(
        str(domain.metrics["classification_cost_usd"])
    ).quantize(Decimal("0.000001"))
    # The instance's hourly budget (the seed's checkBudget) was created and charged.
    budget = Budget.objects.get(scope="instance", key=iid, period="hour")
    assert budget.limit == Decimal("1.00") and budget.spent == sum(
        r.cost for r in ApiCost.objects.filter(instance_id=iid)
    )


def test_onboarding_a_domain_again_updates_its_rows_and_adds_none(onboard_clients, drain) -> None:
    domain_onboard_start("acme", "acme.example", backlink_limit=5, keyword_limit=10, referring_domains_limit=10)
    drain()
    second, created = domain_onboard_start("acme", "acme.example", run="2", **SMALL)
    assert created
    drain()
    assert get(second).status()["status"] == "complete"
    domain = Domain.objects.get(tenant="acme", name="acme.example")
    assert Domain.objects.filter(name="acme.example").count() == 1
    assert domain.onboard_count == 2 and domain.onboard_instance_id == second
    assert Backlink.objects.filter(domain=domain).count() == 10  # the first 5 updated, 5 added
    keywords, referring = distinct("acme.example", 10)
    assert RankedKeyword.objects.filter(domain=domain).count() == keywords
    assert ReferringDomain.objects.filter(domain=domain).count() == referring
    # The same run again is already processed: no new instance.
    assert domain_onboard_start("acme", "acme.example", run="2", **SMALL) == (second, False)


def test_a_retryable_error_inside_a_200_is_retried_and_the_onboarding_completes(
    onboard_clients, dataforseo: FakeDataForSEO, drain
) -> None:
    failed = envelope([task_json("backlinks/backlinks/live", {"target": "acme.example"}, code=50000)])
    dataforseo.plan(ROUTE_BACKLINKS, Planned(200, failed))
    iid, _ = domain_onboard_start("acme", "acme.example", **SMALL)
    drain()
    status = get(iid).status()
    assert status["status"] == "complete"
    backlinks = next(s for s in status["steps"] if s["name"] == "fetch-backlinks")
    assert len(backlinks["attempts"]) == 2 and "50000" in backlinks["attempts"][0]["error"]["message"]
    assert dataforseo.count(ROUTE_BACKLINKS) == 2


def test_a_failed_branch_is_recorded_and_the_rest_go_on_to_completed_with_errors(
    onboard_clients, dataforseo: FakeDataForSEO, drain
) -> None:
    rejected = envelope(
        [task_json("dataforseo_labs/google/ranked_keywords/live", {"target": "acme.example"}, code=40501)]
    )
    dataforseo.plan(ROUTE_KEYWORDS, Planned(200, rejected))
    iid, _ = domain_onboard_start("acme", "acme.example", **SMALL)
    drain()
    status = get(iid).status()
    assert status["status"] == "completed_with_errors"
    assert status["output"]["success"] is False
    assert status["output"]["errors"][0].startswith("Keyword fetch failed: DataForSEORequestRejected: ")
    assert len(status["output"]["errors"]) == 1
    keywords = next(s for s in status["steps"] if s["name"] == "fetch-keywords")
    assert keywords["error"]["name"] == "ingest.sources.dataforseo_errors.DataForSEORequestRejected"
    assert "40501" in status["output"]["errors"][0]
    assert status["output"]["metrics"]["backlinks_fetched"] == 10
    assert status["output"]["metrics"]["keywords_fetched"] == 0
    assert dataforseo.count(ROUTE_KEYWORDS) == 1  # a request error is not retried
    domain = Domain.objects.get(name="acme.example")
    assert domain.onboard_status == "completed_with_errors" and domain.errors == status["output"]["errors"]
    assert domain.backlinks_count == 10 and domain.keywords_count == 0


def test_an_exhausted_balance_pauses_the_instance_until_an_operator_resumes_it(
    onboard_clients, dataforseo: FakeDataForSEO, drain
) -> None:
    dataforseo.task_errors["broke.example"] = 40200
    iid, _ = domain_onboard_start("acme", "broke.example", **SMALL)
    drain()
    status = get(iid).status()
    assert status["status"] == "paused"
    fetches = [s for s in status["steps"] if s["name"].startswith("fetch-")]
    assert fetches and all("Payment Required" in s["attempts"][-1]["error"]["message"] for s in fetches)
    calls = dataforseo.count()
    drain()
    assert dataforseo.count() == calls  # paused: nothing retries by itself

    del dataforseo.task_errors["broke.example"]  # the operator topped the account up
    instance_resume(instance_id=iid, actor="ana", reason="balance topped up")
    drain()
    assert get(iid).status()["status"] == "complete"
    assert Domain.objects.get(name="broke.example").backlinks_count == 10


def test_a_budget_breach_pauses_for_approval_and_an_approval_lets_it_finish(onboard_clients, drain) -> None:
    budget_upsert(scope="service", key="dataforseo", period="day", limit="0.05", policy="approval", actor="ana")
    iid, _ = domain_onboard_start("acme", "acme.example", **SMALL)
    drain()
    assert get(iid).status()["status"] == "paused"
    request = ApprovalRequest.objects.get(instance_id=iid, state="pending")
    assert request.budget.key == "dataforseo"
    assert ApiCost.objects.filter(instance_id=iid).count() < 3  # the breaching call was never made
    approval_answer(approval_id=request.id, approved=True, values={"amount": "1.00"}, actor="ana")
    drain()
    assert get(iid).status()["status"] == "complete"


def test_bad_params_are_refused_before_anything_starts(onboard_clients) -> None:
    with pytest.raises(InvalidParams, match="not a domain name"):
        domain_onboard_start("acme", "not a domain")
    with pytest.raises(InvalidParams, match="backlink_limit must be an integer from 1 to 1000"):
        domain_onboard_start("acme", "acme.example", backlink_limit=5000)
    with pytest.raises(InvalidParams, match="skip_keywords must be true or false"):
        domain_onboard_start("acme", "acme.example", skip_keywords="yes")
    assert not Instance.objects.filter(workflow="domain-onboard").exists()


def test_an_unknown_domain_id_ends_the_onboarding_under_the_lookup_s_error_name(onboard_clients, drain) -> None:
    iid, _ = domain_onboard_start("acme", "acme.example", domain_id=987654, **SMALL)
    drain()
    status = get(iid).status()
    assert status["status"] == "errored"
    # Named by what failed (the dead letters group by it), with the way out in the message.
    assert status["error"]["name"] == "ingest.rankdisco.services.DomainNotFound"
    assert status["error"]["message"].endswith("; start the onboarding without domain_id to create it")
    ensure = next(s for s in status["steps"] if s["name"] == "ensure-domain")
    assert len(ensure["attempts"]) == 1  # permanent: not retried
    assert step_names(iid)[-1] == "ensure-domain"  # nothing fetched or paid for


def test_skip_flags_skip_their_fetches(onboard_clients, dataforseo: FakeDataForSEO, drain) -> None:
    iid, _ = domain_onboard_start(
        "acme", "acme.example", skip_keywords=True, skip_referring_domains=True, skip_brand_properties=True, **SMALL
    )
    drain()
    status = get(iid).status()
    assert status["status"] == "complete"
    names = step_names(iid)
    assert "fetch-keywords" not in names and "fetch-referring-domains" not in names
    assert "fetch-ranking-url-spam-scores" not in names and "discover-ranking-domain-properties" not in names
    assert dataforseo.count(ROUTE_KEYWORDS) == 0


def test_the_instance_hourly_budget_pauses_an_onboarding_that_would_spend_past_it(onboard_clients, drain) -> None:
    iid, _ = domain_onboard_start("acme", "acme.example", max_cost_per_hour="0.01", **SMALL)
    drain()
    assert get(iid).status()["status"] == "paused"
    request = ApprovalRequest.objects.get(instance_id=iid, state="pending")
    assert (request.budget.scope, request.budget.key, request.budget.period) == ("instance", iid, "hour")
    assert not ApiCost.objects.filter(instance_id=iid).exists()  # nothing was spent past the limit
