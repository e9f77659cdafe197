"""The domain page's "Cost by stage" reconciles with what the onboarding cost: every cost row of
the onboarding and of its url-classify children, whatever host each child's URL is on."""

from __future__ import annotations

from decimal import Decimal
from typing import Any
from urllib.parse import urlsplit

import pytest
from django.db.models import Sum
from django.test import Client

from dashboard.access import demo_users_ensure
from ingest.engine import Workflow, get
from ingest.engine import workflow as registry
from ingest.engine.models import ApiCost, Instance
from ingest.rankdisco.models import Domain
from ingest.workflows.domain_onboard import domain_onboard_start

pytestmark = [pytest.mark.db, pytest.mark.django_db(transaction=True)]

ZENROWS_PREMIUM_PAGE = Decimal("0.0013")  # what the child pays ZenRows for a backlink page on another host


class ClassifyWithZenRows(Workflow):
    """url-classify as far as costs go: a URL on another host than the onboarded domain needed
    ZenRows, booked (as the real content stage books it) under that URL's host."""

    name = "url-classify-zenrows-double"

    def run(self, event: Any, step: Any) -> dict[str, Any]:
        url = str(event.payload["url"])
        host = (urlsplit(url).hostname or "").removeprefix("www.")

        def content(ctx: Any) -> str:
            if host == "acme.example":
                return "0"
            return str(
                ctx.track_cost(
                    "zenrows", cost=ZENROWS_PREMIUM_PAGE, items=1, metadata={"stage": "content", "domain": host}
                )
            )

        cost = step.do("content", content)
        return {
            "url": url,
            "confidence": 75,
            "classification_source": "content",
            "stages_run": ["cache", "rules", "content"],
            "round": 0,
            "cost_usd": float(cost),
        }


def test_cost_by_stage_adds_up_to_the_onboardings_cost_with_classifications_on_other_hosts(
        onboard_clients: Any, drain: Any, monkeypatch: pytest.MonkeyPatch) -> None:  # fmt: skip
    monkeypatch.setitem(registry._registry, "url-classify", ClassifyWithZenRows)
    iid, _ = domain_onboard_start(
        "acme", "acme.example", backlink_limit=10, keyword_limit=10, referring_domains_limit=10
    )
    drain()
    assert get(iid).status()["status"] == "complete"
    children = list(Instance.objects.filter(parent_id=iid).values_list("id", flat=True))
    ledger = ApiCost.objects.filter(instance_id__in=[iid, *children])
    total = ledger.aggregate(t=Sum("cost"))["t"]
    elsewhere = ledger.filter(service="zenrows").exclude(metadata__domain="acme.example")
    assert elsewhere.count() > 0  # booked under the backlink pages' hosts, not the domain's

    demo_users_ensure()
    viewer = Client()
    assert viewer.login(username="viewer", password="viewer")
    domain = Domain.objects.get(tenant="acme", name="acme.example")
    detail = viewer.get(f"/domains/{domain.id}/").context["d"]
    stages = detail.cost_by_stage
    assert sum((c["total"] for c in stages), Decimal(0)) == detail.cost_total == total
    assert sum(c["calls"] for c in stages) == ledger.count()  # every row once
    assert domain.cost_usd.quantize(Decimal("0.01")) == total.quantize(Decimal("0.01"))
    content = [c for c in stages if c["stage"] == "content"]
    assert [(c["service"], c["total"]) for c in content] == [("zenrows", ZENROWS_PREMIUM_PAGE * elsewhere.count())]
