"""The demo's triggers: `manage.py up` creates a schedule, a route with its ingress credential and
an event subscription once; the credential's token and secret are printed by the run that makes
them and by no other, kept only hashed and encrypted, and logged nowhere; the route works with
them, offline."""

from __future__ import annotations

import io
import logging
import re
from collections.abc import Callable

import pytest
from django.db import connection
from django.test import Client
from django.utils import timezone

from dashboard.management.commands.up import Command as Up
from ingest.demo.triggers import CREDENTIAL, EVENT_PATTERN, ROUTE, SCHEDULE
from ingest.engine.models import Instance
from ingest.triggers import signing
from ingest.triggers.models import IngressSecret, Route, Schedule, Subscription
from ingest.triggers.services import schedule_run_now
from tests.triggers.support import signed_post

pytestmark = [pytest.mark.db, pytest.mark.django_db]
PRINTED = re.compile(r"token:\s+(rli_\S+)\n\s+HMAC secret:\s+(rls_\S+)")


def up_demo_triggers() -> str:
    out = io.StringIO()
    Up(stdout=out)._demo_triggers()
    return out.getvalue()


def counts() -> tuple[int, int, int, int]:
    return (
        Schedule.objects.count(),
        Route.objects.count(),
        IngressSecret.objects.count(),
        Subscription.objects.count(),
    )


def test_up_creates_each_demo_trigger_once_and_prints_the_credential_once(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG)
    first = up_demo_triggers()
    token, secret = PRINTED.search(first).groups()  # type: ignore[union-attr]
    assert counts() == (1, 1, 1, 1)
    assert f"schedule {SCHEDULE}" in first and "already there" in first

    second = up_demo_triggers()
    assert counts() == (1, 1, 1, 1)
    assert token not in second and secret not in second and "rli_" not in second
    assert f"none created; schedule {SCHEDULE}, route {ROUTE}" in second

    credential = IngressSecret.objects.get(tenant="acme", name=CREDENTIAL)
    assert credential.token_hash == signing.token_hash(token)
    with connection.cursor() as cursor:  # the stored row, as the database holds it
        cursor.execute("SELECT * FROM triggers_ingresssecret")
        stored = repr(cursor.fetchall())
    assert token not in stored and secret not in stored
    assert not any(token in r.getMessage() or secret in r.getMessage() for r in caplog.records)


def test_the_demo_route_and_schedule_start_url_classify_offline(drain: Callable[..., int]) -> None:
    token, secret = PRINTED.search(up_demo_triggers()).groups()  # type: ignore[union-attr]
    answer = signed_post(
        Client(),
        ROUTE,
        {"url": "https://shop.example.org/pricing", "skip_content": True, "skip_llm": True},
        token=token,
        secret=secret,
    )
    assert answer.status_code in (200, 202), answer.content
    routed = answer.json()["instance_id"]
    scheduled = schedule_run_now(name=SCHEDULE, now=timezone.now(), actor="test")
    drain(max_turns=200)
    assert Instance.objects.get(pk=routed).status == "complete"
    assert Instance.objects.get(pk=scheduled).status == "complete"
    sub = Subscription.objects.get()
    assert (sub.pattern, sub.workflow, sub.tenant) == (EVENT_PATTERN, "url-classify", "acme")
