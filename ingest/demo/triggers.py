"""Demo triggers: one of each kind, so the schedules and routes pages show something real.

`demo_triggers()` creates, for the showcase tenant, a cron schedule and an HTTP route that start
url-classify, an ingress credential for that route, and an event subscription. Each is created
only when it is missing, so a second run creates nothing and never undoes an operator's edit.
The credential's token and HMAC secret are returned only by the run that mints them, for
`manage.py up` to print once; the database keeps the token's hash and the secret encrypted.

url-classify runs offline here: `skip_content` and `skip_llm` keep it to the URL rules (and the
similarity stage only when an embedding provider is configured).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from django.db import transaction

from ingest.demo.seed import SHOWCASE
from ingest.triggers.models import IngressSecret, Route, Schedule, Subscription
from ingest.triggers.services import (
    ingress_secret_create,
    route_upsert,
    schedule_create,
    subscription_create,
)
from ingest.workflows.url_classify.workflow import WORKFLOW as URL_CLASSIFY

SCHEDULE = "demo-classify-pricing"
ROUTE = "demo-classify"
CREDENTIAL = "demo"
EVENT_PATTERN = "url.submitted"
OFFLINE = {"skip_content": True, "skip_llm": True}


@dataclass(frozen=True)
class MintedCredential:
    """An ingress credential made by this run: the only time its token and secret are known."""

    tenant: str
    name: str
    token: str
    hmac_secret: str


@dataclass(frozen=True)
class DemoTriggers:
    created: tuple[str, ...]
    already: tuple[str, ...]
    credential: MintedCredential | None


def demo_triggers(*, now: datetime) -> DemoTriggers:
    """Create the demo schedule, route, ingress credential and subscription where missing."""
    created: list[str] = []
    already: list[str] = []

    def note(what: str, made: bool) -> None:
        (created if made else already).append(what)

    minted: MintedCredential | None = None
    with transaction.atomic():
        made = not Schedule.objects.filter(name=SCHEDULE).exists()
        if made:
            schedule_create(
                name=SCHEDULE,
                workflow=URL_CLASSIFY,
                cron_expression="0 * * * *",
                now=now,
                params={"url": "https://www.example.com/pricing", **OFFLINE},
                tenant=SHOWCASE,
            )
        note(f"schedule {SCHEDULE}", made)
        made = not Route.objects.filter(name=ROUTE).exists()
        if made:
            route_upsert(
                name=ROUTE,
                workflow=URL_CLASSIFY,
                tenant=SHOWCASE,
                description='POST {"url": "https://…", "skip_content": true, "skip_llm": true} to classify one URL',
            )
        note(f"route {ROUTE}", made)
        made = not IngressSecret.objects.filter(tenant=SHOWCASE, name=CREDENTIAL).exists()
        if made:
            _, token, secret = ingress_secret_create(tenant=SHOWCASE, name=CREDENTIAL)
            minted = MintedCredential(tenant=SHOWCASE, name=CREDENTIAL, token=token, hmac_secret=secret)
        note(f"ingress credential {SHOWCASE}/{CREDENTIAL}", made)
        made = not Subscription.objects.filter(workflow=URL_CLASSIFY, pattern=EVENT_PATTERN, tenant=SHOWCASE).exists()
        if made:
            subscription_create(workflow=URL_CLASSIFY, pattern=EVENT_PATTERN, tenant=SHOWCASE)
        note(f"subscription {EVENT_PATTERN}", made)
    return DemoTriggers(created=tuple(created), already=tuple(already), credential=minted)
