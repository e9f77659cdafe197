"""The circuit breakers page: who sees which breaker, the state shown, and the audited reset,
from the operator's, the viewer's and the stranger's side (and staff for shared keys)."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.test import Client

from dashboard.models import AuditEntry
from ingest.engine.breaker import BreakerPolicy
from ingest.engine.models import BreakerTransition, CircuitBreaker
from ingest.engine.services.breakers import breaker_admit, breaker_record

pytestmark = pytest.mark.db
POLICY = BreakerPolicy(threshold=2, window=timedelta(minutes=1), cooldown=timedelta(minutes=5))


def trip(key: str, tenant: str = "") -> None:
    for _ in range(2):
        breaker_record(breaker_admit(key=key, policy=POLICY, tenant=tenant), ok=False, error="HTTP 503")


@pytest.fixture
def tripped(db) -> None:
    trip("gong:acme", "acme")
    trip("zenrows:initech", "initech")
    trip("dataforseo:main")  # shared by every tenant


@pytest.fixture
def admin(users) -> Client:
    client = Client()
    assert client.login(username="admin", password="admin")
    return client


def shown(response) -> set[str]:
    text = response.content.decode()
    return {key for key in ("gong:acme", "zenrows:initech", "dataforseo:main") if f'data-breaker="{key}"' in text}


def test_members_see_their_tenants_breakers_and_staff_also_the_shared_ones(tripped, operator, viewer, stranger, admin):
    assert shown(operator.get("/breakers/")) == {"gong:acme"}
    assert shown(viewer.get("/breakers/")) == {"gong:acme"}
    assert shown(stranger.get("/breakers/")) == {"zenrows:initech"}
    assert shown(admin.get("/breakers/")) == {"gong:acme", "zenrows:initech", "dataforseo:main"}


def test_the_list_shows_state_failures_and_next_probe_and_filters_by_state(tripped, operator):
    page = operator.get("/breakers/").content.decode()
    assert 'data-state="open"' in page and "closed → open" in page and "Reset…" in page
    assert shown(operator.get("/breakers/?state=closed")) == set()
    bogus = operator.get("/breakers/?state=bogus")  # unknown: named, never read as "no filter"
    assert bogus.status_code == 400 and "state=&#x27;bogus&#x27;" in bogus.content.decode()


def test_the_detail_page_lists_transitions_and_hides_other_tenants_breakers(tripped, operator, stranger):
    page = operator.get("/breakers/gong:acme/")
    assert page.status_code == 200 and "reached the threshold of 2" in page.content.decode()
    assert stranger.get("/breakers/gong:acme/").status_code == 404
    assert operator.get("/breakers/dataforseo:main/").status_code == 404  # shared: staff only


def test_an_operator_resets_a_breaker_with_an_audit_entry_and_a_transition(tripped, operator):
    r = operator.post("/breakers/reset/", {"key": "gong:acme", "reason": "Gong status page is green"})
    assert r.status_code == 302
    assert CircuitBreaker.objects.get(key="gong:acme").state == "closed"
    last = BreakerTransition.objects.filter(breaker_id="gong:acme").order_by("-id").first()
    assert (last.to_state, last.actor) == ("closed", "operator")
    entry = AuditEntry.objects.get()
    assert (entry.action, entry.tenants, entry.selection["key"], entry.reason) == (
        "breaker.reset",
        ["acme"],
        "gong:acme",
        "Gong status page is green",
    )


def test_viewers_strangers_and_non_staff_cannot_reset_and_nothing_changes(tripped, viewer, stranger, operator):
    assert viewer.post("/breakers/reset/", {"key": "gong:acme"}).status_code == 403
    assert stranger.post("/breakers/reset/", {"key": "gong:acme"}).status_code == 404
    assert operator.post("/breakers/reset/", {"key": "dataforseo:main"}).status_code == 404
    assert operator.post("/breakers/reset/", {"key": ""}).status_code == 404
    assert operator.post("/breakers/reset/", {"key": "gong:acme", "reason": "x" * 501}).status_code == 400
    assert set(CircuitBreaker.objects.values_list("state", flat=True)) == {"open"}
    assert not AuditEntry.objects.exists()


def test_staff_reset_a_shared_breaker(tripped, admin):
    assert admin.post("/breakers/reset/", {"key": "dataforseo:main"}).status_code == 302
    assert CircuitBreaker.objects.get(key="dataforseo:main").state == "closed"
    assert AuditEntry.objects.get().tenants == []
