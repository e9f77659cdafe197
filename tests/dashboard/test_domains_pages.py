"""The domain pages: list and detail within the user's tenants, classifications by source
stage, cost by stage; and the costs page's breakdown by stage and domain."""

from __future__ import annotations

from datetime import timedelta
from decimal import Decimal

import pytest
from django.utils import timezone

from ingest.engine.models import ApiCost
from ingest.rankdisco import services
from ingest.rankdisco.models import Domain

pytestmark = [pytest.mark.db, pytest.mark.django_db]


def _domain(tenant: str, name: str) -> Domain:
    domain = services.domain_ensure(tenant=tenant, name=name)
    now = timezone.now()
    services.backlinks_upsert(
        domain=domain,
        now=now,
        items=[
            {"url_from": f"https://www.youtube.com/watch?v={i}", "url_to": f"https://{name}/", "anchor": f"anchor {i}"}
            for i in range(3)
        ]
        + [{"url_from": "https://blog.other.example/post", "url_to": f"https://{name}/x"}],
    )
    services.keywords_upsert(
        domain=domain,
        now=now,
        items=[{"keyword": "ledger pricing", "url": f"https://{name}/pricing", "search_volume": 900}],
    )
    services.classifications_store(
        domain_id=domain.id,
        results=[
            *(
                {
                    "url": f"https://www.youtube.com/watch?v={i}",
                    "confidence": 95,
                    "classification_source": "rules",
                    "page_type": "video",
                    "cost_usd": 0,
                }
                for i in range(3)
            ),
            {
                "url": "https://blog.other.example/post",
                "confidence": 80,
                "classification_source": "llm",
                "cost_usd": 0.001,
            },
            {"url": f"https://{name}/pricing", "confidence": 90, "classification_source": "content", "cost_usd": 0.001},
        ],
    )
    services.domain_counters_track(domain_id=domain.id, urls_queued=4, keywords_queued=1)
    for stage, amount in (("backlinks", "0.023"), ("keywords", "0.02"), ("llm", "0.001")):
        ApiCost.objects.create(
            service="dataforseo" if stage != "llm" else "openai",
            cost=Decimal(amount),
            workflow_type="domain-onboard" if stage != "llm" else "url-classify",
            step_name=f"fetch-{stage}",
            tenant=tenant,
            metadata={"stage": stage, "domain": name},
            created_at=timezone.now() - timedelta(minutes=1),
        )
    return domain


def test_the_domain_list_shows_my_tenants_domains_only(operator, stranger) -> None:
    mine, theirs = _domain("acme", "acme.example"), _domain("initech", "initech.example")
    page = operator.get("/domains/")
    assert page.status_code == 200
    html = page.content.decode()
    assert "acme.example" in html and "initech.example" not in html
    assert [d.id for d in page.context["rows"]] == [mine.id]
    assert [d.id for d in stranger.get("/domains/").context["rows"]] == [theirs.id]
    assert operator.get("/domains/?status=completed").context["rows"] == []
    assert operator.get("/domains/?q=acme").context["rows"][0].id == mine.id


def test_a_domain_page_shows_counters_classifications_by_stage_and_cost_by_stage(operator, viewer) -> None:
    domain = _domain("acme", "acme.example")
    page = viewer.get(f"/domains/{domain.id}/")
    assert page.status_code == 200
    assert page.context["sources"] == [("content", 0, 1, 20.0), ("llm", 1, 0, 20.0), ("rules", 3, 0, 60.0)]
    assert page.context["d"].cost_total == Decimal("0.044")
    stages = {c["stage"]: c["total"] for c in page.context["d"].cost_by_stage}
    assert stages == {"backlinks": Decimal("0.023"), "keywords": Decimal("0.02"), "llm": Decimal("0.001")}
    html = page.content.decode()
    assert "Classifications by source stage" in html and "https://www.youtube.com/watch?v=0" in html


def test_a_domain_of_another_tenant_is_not_found(operator, stranger) -> None:
    theirs = _domain("initech", "initech.example")
    assert operator.get(f"/domains/{theirs.id}/").status_code == 404
    assert stranger.get(f"/domains/{theirs.id}/").status_code == 200
    assert operator.get("/domains/999999/").status_code == 404


def test_the_costs_page_breaks_down_by_stage_and_by_domain(operator) -> None:
    _domain("acme", "acme.example")
    _domain("globex", "globex.example")
    _domain("initech", "initech.example")  # not the operator's
    by_stage = {r["key"]: r["total"] for r in operator.get("/costs/?window=24h&by=stage").context["by_dimension"]}
    assert by_stage == {"backlinks": Decimal("0.046"), "keywords": Decimal("0.04"), "llm": Decimal("0.002")}
    by_domain = {r["key"]: r["total"] for r in operator.get("/costs/?window=24h&by=domain").context["by_dimension"]}
    assert by_domain == {"acme.example": Decimal("0.044"), "globex.example": Decimal("0.044")}


def test_reupserting_the_same_rows_keeps_one_row_each() -> None:
    domain = _domain("acme", "acme.example")
    again = services.domain_ensure(tenant="acme", name="https://WWW.acme.example/path")
    assert again.id == domain.id
    services.backlinks_upsert(
        domain=domain,
        now=timezone.now(),
        items=[{"url_from": "https://blog.other.example/post", "url_to": "https://acme.example/x", "anchor": "new"}],
    )
    assert domain.backlinks.count() == 4
    assert domain.backlinks.get(url_from="https://blog.other.example/post").anchor == "new"


@pytest.mark.parametrize("raw", ["", "not a domain", "http://", "exa mple.com", "-bad-.com", "a" * 300 + ".com"])
def test_a_name_that_is_not_a_domain_is_refused(raw: str) -> None:
    with pytest.raises(services.InvalidDomain):
        services.domain_name_normalize(raw)


def test_a_backlinks_classification_shows_how_long_its_run_took(viewer) -> None:
    domain = _domain("acme", "acme.example")
    services.classifications_store(
        domain_id=domain.id,
        results=[
            {
                "url": "https://blog.other.example/post",
                "confidence": 80,
                "classification_source": "llm",
                "cost_usd": 0.001,
                "duration_ms": 61234,
            }
        ],
    )
    html = viewer.get(f"/domains/{domain.id}/").content.decode()
    assert '<span class="duration">61234 ms</span>' in html
    assert html.count('class="duration"') == 1  # the rows classified before it was measured show none


def _intents(domain: Domain) -> None:
    services.keywords_upsert(
        domain=domain,
        now=timezone.now(),
        items=[
            {"keyword": "buy ledger", "search_volume": 500},
            {"keyword": "ledger api", "search_volume": 300},
            {"keyword": "what is a ledger", "search_volume": 100},
            {"keyword": "ledger orbit", "search_volume": 50},
        ],
    )
    services.keyword_intents_store(
        domain_id=domain.id,
        verdicts={
            "ledger pricing": ("transactional", "rules", 85),
            "buy ledger": ("transactional", "rules", 85),
            "ledger api": ("informational", "llm", 91),
            "what is a ledger": ("informational", "rules", 85),
        },
    )


def test_a_domain_page_shows_its_keywords_intents_and_who_decided_them(viewer) -> None:
    domain = _domain("acme", "acme.example")
    _intents(domain)
    page = viewer.get(f"/domains/{domain.id}/")
    assert page.status_code == 200
    assert [(c.intent, c.keywords, c.by_rules, c.by_llm, pct) for c, pct in page.context["intents"]] == [
        ("informational", 2, 1, 1, 50.0),
        ("transactional", 2, 2, 0, 50.0),
    ]
    assert page.context["d"].intent_unclassified == 1  # "ledger orbit"
    html = page.content.decode()
    assert 'aria-label="Keyword intents"' in html and "4 keywords classified, 1 not yet" in html
    assert '<span class="tag">informational</span> <span class="muted">llm, 91%</span>' in html

    only = viewer.get(f"/domains/{domain.id}/?intent=transactional")
    assert [k.keyword for k in only.context["d"].keywords] == ["ledger pricing", "buy ledger"]
    assert "transactional only" in only.content.decode()
    assert viewer.get(f"/domains/{domain.id}/?intent=curious").status_code == 400


def test_another_tenants_keyword_intents_are_not_shown(operator, stranger) -> None:
    theirs = _domain("initech", "initech.example")
    _intents(theirs)
    assert operator.get(f"/domains/{theirs.id}/?intent=informational").status_code == 404
    assert stranger.get(f"/domains/{theirs.id}/").context["intents"][0][0].keywords == 2
