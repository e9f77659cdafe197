"""The instances list's page and count read together (`instance_list_counted`): for every sort
and the filters the list offers, the same rows in the same order and the same count as the
straightforward queries give them (a LIMIT/OFFSET over the ordered matches, a count of all of
them), on both sides of the count's cap."""

from __future__ import annotations

from datetime import timedelta
from decimal import Decimal

import pytest
from django.contrib.auth import get_user_model
from django.db.models import F
from django.http import QueryDict
from ledger_factories import T0, make_instance

from dashboard.models import InstanceCost
from dashboard.selectors import InstanceFilters, instance_list_counted
from dashboard.selectors.instances import SORT_LABELS, instance_filtered, instance_order
from ingest.engine.models import Instance, Step
from ingest.engine.services.attributes import attributes_set

pytestmark = pytest.mark.db

STATUSES = ["errored", "running", "complete", "paused", "waiting", "queued", "terminated"]
FILTERS = ["", "status=errored&status=paused", "workflow=ingest", "attr=domain:a.com", "step=llm-extract",
           "since=2026-01-01T00:10&until=2026-01-01T00:40", "tenant=globex&status=complete",
           # statuses with an attribute, and three statuses: the shapes instance_status covers
           "attr=domain:a.com&status=errored&status=paused&status=complete",
           "status=errored&status=paused&status=waiting"]
SORTS = [*SORT_LABELS, "attr.customer", "-attr.customer"]


@pytest.fixture
def ledger(users):
    for n in range(40):
        created = T0 + timedelta(minutes=n // 2)  # pairs share created_at: the id breaks the tie
        status = STATUSES[n % len(STATUSES)]
        started = None if status == "queued" else created + timedelta(seconds=n % 5)
        ended = created + timedelta(seconds=3 * (n % 7)) if status in ("complete", "errored", "terminated") else None
        make_instance(f"i{n:02d}", status=status, tenant=["acme", "globex", "initech"][n % 3],
                      workflow=["gong-ingest", "salesforce-ingest", "domain-onboard"][n % 3 if n % 4 else 0],
                      created_at=created, ended_at=ended)
        Instance.objects.filter(id=f"i{n:02d}").update(started_at=started,
                                                       updated_at=created + timedelta(seconds=(n * 37) % 11))
        if n % 3:
            attributes_set(instance_id=f"i{n:02d}", values={"domain": "a.com" if n % 2 else "b.com",
                                                           **({"customer": f"c{n % 4}"} if n % 5 else {})})
        if n % 2:
            Step.objects.create(instance_id=f"i{n:02d}", name="llm-extract", seq=1, position=1, status="complete",
                                started_at=created)
        if n % 4:
            InstanceCost.objects.create(instance_id=f"i{n:02d}", tenant="acme", workflow_type="gong-ingest",
                                        total=Decimal(n % 6) / 100, calls=1, failed=0, tokens_in=0, tokens_out=0,
                                        first_at=created, last_at=created)
    return get_user_model().objects.get(username="operator")


def _straight(user, filters, now):
    """The matches in the list's order, by the plain ORM: every row, ordered, no cap."""
    qs = instance_filtered(user=user, filters=filters, now=now)
    if filters.keyset:
        qs = qs.order_by(F("created_at").desc(), F("id").desc())
    else:
        qs = instance_order(qs, filters.sort)
    return list(qs.values_list("id", flat=True))


@pytest.mark.parametrize("query", FILTERS)
@pytest.mark.parametrize("sort", SORTS)
def test_page_and_count_equal_the_straightforward_queries_on_both_sides_of_the_cap(ledger, query, sort):
    filters = InstanceFilters.from_query(QueryDict(f"{query}&sort={sort}"))
    assert not filters.problems
    now = T0 + timedelta(hours=1)
    expected = _straight(ledger, filters, now)
    for cap in (3, len(expected), 100):
        pages = [1] if filters.keyset else [1, 2, 3]
        for page in pages:
            got = instance_list_counted(user=ledger, filters=filters, limit=4, page=page, cap=cap, now=now)
            want = expected[(page - 1) * 4: page * 4]
            assert [r.id for r in got.page.rows] == want, (cap, page)
            assert (got.count, got.count_more) == (min(len(expected), cap), len(expected) > cap), (cap, page)
            assert got.page.has_more == (len(expected) > page * 4)
            if filters.keyset:
                assert (got.page.next_cursor.id if got.page.next_cursor else None) == \
                    (want[-1] if len(expected) > 4 else None)


def test_the_count_is_exact_up_to_the_cap_and_says_more_past_it(ledger):
    filters = InstanceFilters.from_query(QueryDict("status=errored&status=complete&status=running"))
    now = T0 + timedelta(hours=1)
    n = len(_straight(ledger, filters, now))
    assert n > 5
    exact = instance_list_counted(user=ledger, filters=filters, cap=n, now=now)
    assert (exact.count, exact.count_more) == (n, False)
    capped = instance_list_counted(user=ledger, filters=filters, cap=n - 1, now=now)
    assert (capped.count, capped.count_more) == (n - 1, True)
    assert [r.id for r in capped.page.rows] == [r.id for r in exact.page.rows]


def test_the_page_shows_the_count_with_a_plus_past_the_cap(operator, ledger, monkeypatch):
    from dashboard.selectors import instances

    real = instances.instance_list_counted
    monkeypatch.setattr("dashboard.selectors.instance_list_counted", lambda **kw: real(**kw, cap=3))
    body = operator.get("/instances/").content.decode()
    assert '<strong>3+</strong> instances in your tenants' in body
    body = operator.get("/instances/?status=errored&tenant=acme").content.decode()
    assert '<strong>2</strong> instances match' in body
