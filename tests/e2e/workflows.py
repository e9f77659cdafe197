"""Workflows the browser tests run; the worker process registers them through
RUNLEDGER_WORKFLOW_MODULES=tests.e2e.workflows."""

from __future__ import annotations

import logging
import time
from pathlib import Path
from typing import Any

from ingest.engine import NonRetryableError, Workflow

log = logging.getLogger("runledger.e2e")


class LiveSteps(Workflow):
    """Steps that each take `pause` seconds, so a page can watch them turn green one by one."""

    name = "e2e-live-steps"

    def run(self, event: Any, step: Any) -> Any:
        n = int(event.payload.get("steps", 5))
        pause = float(event.payload.get("pause", 0.6))

        def work(ctx: Any) -> dict[str, Any]:
            time.sleep(pause)
            if ctx.name == "extract":
                ctx.track_cost("openai", cost="0.012500", model="gpt-4o-mini", tokens_in=1800, tokens_out=240)
            return {"done": ctx.name, "at": time.time()}

        step.do("fetch", work)
        step.do("extract", work)
        for i in range(1, n - 1):
            step.do(f"persist-facts-{i}", work)
        return {"steps": n}


class NeedsApproval(Workflow):
    """Drafts, asks a person through the approvals inbox, then publishes what they decided."""

    name = "e2e-needs-approval"

    def run(self, event: Any, step: Any) -> Any:
        draft = step.do("draft", lambda ctx: {"facts": 3, "account": event.payload.get("account", "acme")})
        answer = step.wait_for_approval(
            "publish-approval",
            title=f"Publish {draft['facts']} facts for {draft['account']}?",
            description="Extracted from the Q3 renewal call.",
            timeout="1 hour",
            fields=[
                {"name": "max_facts", "label": "Publish at most", "type": "number", "required": True, "default": 3}
            ],
            context={"account": draft["account"], "call": "Q3 renewal"},
            escalation="sales-ops after 1 h",
        )
        step.do("publish", lambda ctx: {"approved": answer["approved"], "values": answer.get("values", {})})
        return {"approved": answer["approved"]}


class Flaky(Workflow):
    """Fails for good unless its params say `fixed`: a dead letter an operator replays edited."""

    name = "e2e-flaky"

    def run(self, event: Any, step: Any) -> Any:
        def fetch(ctx: Any) -> dict[str, Any]:
            if not event.payload.get("fixed"):
                raise NonRetryableError(f"upstream rejected account {event.payload.get('account')}: not fixed")
            return {"ok": True}

        step.do("fetch-account", fetch)
        step.do("store", lambda ctx: {"stored": True})
        return "ok"


# domain-onboard in the browser tests reads the demo's offline DataForSEO and web pages (as the
# demo of `manage.py up` does); its URLs fan out to the real url-classify.
from ingest.demo.rankdisco import demo_clients  # noqa: E402
from ingest.workflows.domain_onboard import clients_install  # noqa: E402

clients_install(demo_clients)


class Tagged(Workflow):
    """Tags itself with search attributes from its params, then waits for an event (so it stays
    waiting for the list and bulk-action tests)."""

    name = "e2e-tagged"

    def run(self, event: Any, step: Any) -> Any:
        step.set_search_attributes(customer=event.payload.get("customer", ""), domain=event.payload.get("domain", ""))
        step.wait_for_event("go", type="go", timeout="1 hour")
        return {"ok": True}


class FanOut22(Workflow):
    """22 parallel steps of one family (the pool runs them a few at a time), then a sleep long
    beside the steps' milliseconds: the run graph groups them, the timeline cuts the sleep short."""

    name = "e2e-fan-out"

    def run(self, event: Any, step: Any) -> Any:
        step.do("fetch", lambda ctx: {"items": 22})
        n = int(event.payload.get("items", 22))
        step.all_settled([step.call(f"persist-facts-{i}", lambda ctx: {"ok": ctx.name}) for i in range(1, n + 1)])
        step.sleep("cool-down", float(event.payload.get("sleep", 3)))
        step.do("publish", lambda ctx: {"published": n})
        return {"items": n}


class Budgeted(Workflow):
    """Asks its budget before a paid call: under an instance budget with the approval policy it
    pauses for an operator's answer in the approvals inbox."""

    name = "e2e-budgeted"

    def run(self, event: Any, step: Any) -> Any:
        step.do("prepare", lambda ctx: {"ready": True})

        def paid(ctx: Any) -> dict[str, Any]:
            ctx.check_budget("openai", "0.50")
            ctx.track_cost("openai", cost="0.50", model="gpt-4o")
            return {"paid": True}

        return step.do("llm-extract", paid)


class LoggedExport(Workflow):
    """A run for the run page: a chain of steps wide enough to overflow a laptop's graph box, four
    steps that run together (one fan-out node), then an export that logs a line and runs until the
    test creates its gate file (so a log line can be watched arriving while it runs)."""

    name = "e2e-logged-export"

    def run(self, event: Any, step: Any) -> Any:
        for name in (
            "load-accounts",
            "load-contacts",
            "load-opportunities",
            "merge-duplicates",
            "score-leads",
            "rank-territories",
            "plan-outreach",
            "draft-summaries",
        ):
            step.do(name, lambda ctx: {"done": ctx.name})

        def enrich(ctx: Any) -> str:
            time.sleep(0.3)  # long enough that the pool runs the four side by side
            return str(ctx.name)

        step.all_settled([step.call(f"enrich-{kind}", enrich) for kind in ("firmographics", "intent", "news", "tech")])

        def export(ctx: Any) -> dict[str, Any]:
            log.info("exporting %d pages to the warehouse", 3)
            gate = Path(event.payload["gate"])
            deadline = time.monotonic() + 120
            while not gate.exists() and time.monotonic() < deadline:
                time.sleep(0.05)
            log.info("export done")
            return {"pages": 3}

        step.do("export", export, retries={"limit": 0})
        return step.do("publish", lambda ctx: {"published": True})


class FanItem(Workflow):
    """One item of e2e-fan-items: tags itself from its params and ends."""

    name = "e2e-fan-item"

    def run(self, event: Any, step: Any) -> Any:
        step.set_search_attributes(
            batch=event.payload["batch"], customer=event.payload["customer"], amount=str(event.payload["amount"])
        )
        return {"ok": True}


class FanItems(Workflow):
    """Tags itself, fans out one e2e-fan-item per item, then waits for an event (so it stays in
    the list as a waiting run with its items landed)."""

    name = "e2e-fan-items"

    def run(self, event: Any, step: Any) -> Any:
        batch = event.payload["batch"]
        step.set_search_attributes(batch=batch, customer="acme", amount="100")
        step.fan_out("tag-items", FanItem, [{"batch": batch, **item} for item in event.payload["items"]], batch_size=10)
        step.wait_for_event("go", type="go", timeout="1 hour")
        return {"ok": True}
