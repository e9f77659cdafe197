"""Demo data: a realistic synthetic set ingested through the same entry points real sources use.

`demo_seed()` configures four tenants (keyword lists, connections with webhook keys, budgets)
and starts `gong-ingest` for synthetic calls and `salesforce-ingest` for synthetic
opportunities from `ingest.demo.corpus`, with `gong_ingest_start` / `salesforce_ingest_start`,
the functions the webhooks and `ingest_pull` call. A worker then runs them. It is idempotent:
instance ids are deterministic, so a second run starts nothing new.

The demo has no LLM key, so its tenants use the "demo" provider (`DemoExtractor` in
`ingest.workflows.providers`): the rule extractor, billed as if DeepSeek had answered, failing
the first attempt of a few chosen calls with a retryable 503 so retries show up. Other cases built in: short check-in
calls with no keyword hit (engagement only), one malformed transcript (dead letter), and one call under an
instance budget with the approval policy (waits for an operator in the approvals inbox); both
of the last in acme, a tenant of the `operator` and `viewer` personas.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any

from ingest.demo.corpus import DemoCall, DemoOpportunity, demo_calls, demo_opportunities
from ingest.engine.models import Budget
from ingest.engine.services.budgets import budget_upsert
from ingest.pipelines.models import ConnectionKind
from ingest.pipelines.services import connection_upsert, keyword_list_set
from ingest.workflows.gong import gong_ingest_start, gong_instance_id
from ingest.workflows.salesforce import salesforce_ingest_start

log = logging.getLogger("runledger.ingest")

TENANTS = ("acme", "globex", "initech", "default")
# The tenant of the built-in cases an operator must see (the dead letter, the approval): the
# README sends a newcomer in as `operator`, a member of acme, and `viewer` reads acme too.
SHOWCASE = "acme"
KEYWORDS = {
    "acme": ["budget", "pricing", "price", "proposal", "Clari", "Outreach", "Salesloft"],
    "globex": ["budget", "procurement", "MSA", "CFO"],
    "initech": ["proposal", "price", "pilot", "sandbox"],
    "default": ["budget", "price", "go live"],
}
DEMO_MODEL = {"provider": "demo", "service": "deepseek", "model": "deepseek-chat"}
CHECK_IN = (
    "{rep}: Hi {buyer}, just checking in before the holidays, no agenda today.\n"
    "{buyer}: Thanks! Things are quiet on our side, the team is mostly out.\n"
    "{rep}: Enjoy the break, talk in January."
)
MALFORMED = "<<transcript export failed: 0x00 0x00 0x00>>"


@dataclass
class DemoSummary:
    started: int = 0
    already: int = 0
    instances: list[str] = field(default_factory=list)
    approval_instance: str = ""
    dead_letter_instance: str = ""
    flaky_calls: list[str] = field(default_factory=list)


def _call_params(call: DemoCall) -> dict[str, Any]:
    return {"call_id": call.id, "title": call.title, "started": call.started.isoformat(), "account": call.account}


def opportunity_record(opp: DemoOpportunity) -> dict[str, Any]:
    """The opportunity as the Salesforce REST API returns it (with its account)."""
    return {
        "Id": opp.id,
        "Name": opp.name,
        "StageName": opp.stage_name,
        "Amount": opp.amount,
        "CloseDate": opp.close_date.isoformat(),
        "Description": opp.description,
        "Notes__c": opp.notes,
        "Account": {"Name": opp.account, "Industry": opp.industry},
        "LastModifiedDate": opp.last_modified.isoformat(timespec="milliseconds").replace("+00:00", "Z"),
    }


def _configure(flaky: list[str]) -> None:
    for tenant in TENANTS:
        keyword_list_set(tenant=tenant, keywords=KEYWORDS[tenant])
        connection_upsert(tenant=tenant, kind=ConnectionKind.LLM, options={**DEMO_MODEL, "flaky": flaky})
        # No credentials and no network: the demo's webhooks start its ingests, no schedule pulls.
        connection_upsert(
            tenant=tenant,
            kind=ConnectionKind.GONG,
            base_url="https://api.gong.io",
            webhook_key=f"demo-{tenant}-gong",
            options={"reconcile": False},
        )
        connection_upsert(
            tenant=tenant,
            kind=ConnectionKind.SALESFORCE,
            base_url="https://login.salesforce.com",
            webhook_key=f"demo-{tenant}-sfdc",
            options={"reconcile": False},
        )
        _budget_once(scope="tenant", key=tenant, period="month", limit="5.00", policy="fail")


def _budget_once(**kwargs: Any) -> None:
    """Create a budget the first time only: a second seed must not undo an operator's grant."""
    if not Budget.objects.filter(scope=kwargs["scope"], key=kwargs["key"], period=kwargs["period"]).exists():
        budget_upsert(actor="demo", **kwargs)


def _start(summary: DemoSummary, started: Any) -> None:
    summary.instances.append(started.instance_id)
    if started.created:
        summary.started += 1
    else:
        summary.already += 1


def demo_seed(*, seed: int = 7, calls: int = 24, opportunities: int = 12) -> DemoSummary:
    """Configure the demo tenants and start their ingests (idempotent; run a worker after)."""
    corpus = demo_calls(seed=seed, count=calls)
    summary = DemoSummary(flaky_calls=[c.id for c in corpus[1::7]])
    _configure(summary.flaky_calls)

    # A long call with an instance budget below its cost: it waits for an operator's approval.
    # Calls go to the tenants in turn; take one of the second round that lands in the showcase tenant.
    pricey = corpus[len(TENANTS) + TENANTS.index(SHOWCASE)]
    summary.approval_instance = gong_instance_id(SHOWCASE, pricey.id)
    _budget_once(scope="instance", key=summary.approval_instance, period="day", limit="0.0001", policy="approval")

    for index, call in enumerate(corpus):
        tenant = TENANTS[index % len(TENANTS)]
        _start(summary, gong_ingest_start(tenant, _call_params(call), transcript=call.transcript_text(), actor="demo"))

    base = corpus[-1]
    for n, tenant in enumerate(("acme", "globex")):
        speakers = base.speakers
        text = CHECK_IN.format(rep=speakers[0].name, buyer=speakers[2 + n].name)
        params = {
            "call_id": f"{seed}{n:02d}0000000000000001",
            "title": f"{base.account} <> check-in",
            "started": (base.started + timedelta(days=2 + n)).isoformat(),
            "account": base.account,
        }
        _start(summary, gong_ingest_start(tenant, params, transcript=text, actor="demo"))

    broken = {
        "call_id": f"{seed}990000000000000013",
        "title": "Hooli <> Northwind Analytics: Demo",
        "started": (base.started + timedelta(days=1)).isoformat(),
        "account": "Hooli",
    }
    summary.dead_letter_instance = gong_instance_id(SHOWCASE, broken["call_id"])
    _start(summary, gong_ingest_start(SHOWCASE, broken, transcript=MALFORMED, actor="demo"))

    for index, opp in enumerate(demo_opportunities(seed=seed, count=opportunities)):
        tenant = TENANTS[index % len(TENANTS)]
        _start(
            summary,
            salesforce_ingest_start(
                tenant, object_id=opp.id, record=opportunity_record(opp), trigger="demo", actor="demo"
            ),
        )
    log.debug("demo: %d ingests started, %d already there", summary.started, summary.already)
    return summary
