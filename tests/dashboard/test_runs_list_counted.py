"""The instances list's page and count read together (`instance_list_counted`): for every sort
and the filters the list offers, the same rows in the same order and the same count as the
straightforward queries give them (a LIMIT/OFFSET over the ordered matches, a count of all of
them), on both sides of the count's cap.

With an attribute filter the list reads engine_instance_attributes alone (its copy of the
instance's tenant, workflow, status and times, migration 0019): the ledger sets every
instance's attributes first and changes its status, workflow, tenant and times afterwards, so a
copy that did not follow would list other rows than the plain queries over the instances."""

from __future__ import annotations

import re
import sys
from datetime import timedelta
from decimal import Decimal

import pytest
from django.contrib.auth import get_user_model
from django.db import connection, transaction
from django.db.models import F
from django.http import QueryDict
from django.test.utils import CaptureQueriesContext
from ledger_factories import T0, make_instance

from dashboard.access import demo_users_ensure
from dashboard.models import InstanceCost
from dashboard.selectors import InstanceFilters, instance_list_counted
from dashboard.selectors.instance_filters import SORT_LABELS
from dashboard.selectors.instance_matches import (
    attribute_rows_filtered,
    attribute_values_filtered,
    instance_filtered,
)
from dashboard.selectors.instances import (
    Cursor,
    instance_count,
    instance_count_newer,
    instance_list,
    instance_order,
)
from ingest.engine.models import Instance, Step
from ingest.engine.services.attributes import attributes_set

pytestmark = pytest.mark.db

STATUSES = ["errored", "running", "complete", "paused", "waiting", "queued", "terminated"]
FILTERS = [
    "",
    "status=errored&status=paused",
    "workflow=ingest",
    "attr=domain:a.com",
    "step=llm-extract",
    "since=2025-01-06T12:05&until=2025-01-06T12:14",
    "tenant=globex&status=complete",
    # statuses with an attribute, and three statuses: the shapes instance_status covers
    "attr=domain:a.com&status=errored&status=paused&status=complete",
    "status=errored&status=paused&status=waiting",
    # an attribute with the filters the attribute rows answer alone (their copy)
    "workflow=ingest&status=complete&status=errored&attr=domain:a.com",
    "workflow=salesforce-ingest&attr=customer:c1",
    "tenant=globex&attr=domain:b.com",
    "attr=domain:a.com&since=2025-01-06T12:05&until=2025-01-06T12:15",
    "attr=domain:b.com&range=1h",
    "attr=domain:a.com&step=llm-extract",
    "attr=domain:b.com&id=i1",
    "attr=domain:a.com&q=initech",
    "attr=domain:a.com+customer:c3",
]
SORTS = [*SORT_LABELS, "attr.customer", "-attr.customer"]


@pytest.fixture(scope="module")
def _ledger_rows(django_db_setup, django_db_blocker):
    """The ledger, written once for the module's ~250 tests inside a transaction rolled back after
    the last of them; each test runs in a savepoint of it (as Django's setUpTestData does), so
    what one test writes is gone before the next."""
    with django_db_blocker.unblock():
        outer = transaction.atomic()
        outer.__enter__()
        try:
            demo_users_ensure()
            _write_ledger()
        except BaseException:
            outer.__exit__(*sys.exc_info())
            raise
    yield
    with django_db_blocker.unblock():
        transaction.set_rollback(True)
        outer.__exit__(None, None, None)


@pytest.fixture
def ledger(_ledger_rows, db):
    return get_user_model().objects.get(username="operator")


def _write_ledger():
    for n in range(40):
        created = T0 + timedelta(minutes=n // 2)  # pairs share created_at: the id breaks the tie
        status = STATUSES[n % len(STATUSES)]
        started = None if status == "queued" else created + timedelta(seconds=n % 5)
        ended = created + timedelta(seconds=3 * (n % 7)) if status in ("complete", "errored", "terminated") else None
        tenant = ["acme", "globex", "initech"][n % 3]
        # Created queued, in another workflow and (one in two) another tenant: the operator's
        # tenants gain some rows after their attributes are set (initech to acme) and lose others.
        make_instance(
            f"i{n:02d}",
            status="queued",
            tenant=("initech" if tenant != "initech" else "acme") if n % 2 else tenant,
            workflow="draft-flow",
            created_at=created,
            ended_at=None,
        )
        if n % 3:
            attributes_set(
                instance_id=f"i{n:02d}",
                values={"domain": "a.com" if n % 2 else "b.com", **({"customer": f"c{n % 4}"} if n % 5 else {})},
            )
        Instance.objects.filter(id=f"i{n:02d}").update(
            status=status,
            tenant=tenant,
            workflow=["gong-ingest", "salesforce-ingest", "domain-onboard"][n % 3 if n % 4 else 0],
            started_at=started,
            ended_at=ended,
            updated_at=created + timedelta(seconds=(n * 37) % 11),
        )
        if n % 2:
            Step.objects.create(
                instance_id=f"i{n:02d}", name="llm-extract", seq=1, position=1, status="complete", started_at=created
            )
        if n % 4:
            InstanceCost.objects.create(
                instance_id=f"i{n:02d}",
                tenant="acme",
                workflow_type="gong-ingest",
                total=Decimal(n % 6) / 100,
                calls=1,
                failed=0,
                tokens_in=0,
                tokens_out=0,
                first_at=created,
                last_at=created,
            )


def _straight(user, filters, now):
    """The matches in the list's order, by the plain ORM: every row, ordered, no cap."""
    qs = instance_filtered(user=user, filters=filters, now=now)
    qs = qs.order_by(F("created_at").desc(), F("id").desc()) if filters.keyset else instance_order(qs, filters.sort)
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
            want = expected[(page - 1) * 4 : page * 4]
            assert [r.id for r in got.page.rows] == want, (cap, page)
            assert (got.count, got.count_more) == (min(len(expected), cap), len(expected) > cap), (cap, page)
            assert got.page.has_more == (len(expected) > page * 4)
            if filters.keyset:
                assert (got.page.next_cursor.id if got.page.next_cursor else None) == (
                    want[-1] if len(expected) > 4 else None
                )


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
    assert "<strong>3+</strong> instances in your tenants" in body
    body = operator.get("/instances/?status=errored&tenant=acme").content.decode()
    assert "<strong>2</strong> instances match" in body


def test_an_attribute_filter_reads_the_attribute_rows_alone(ledger):
    """The matches, the count and the order come from one attribute's value rows,
    engine_instance_attribute_values (no instance row read per match, nor the JSON attribute
    rows); the instances are read for the page's rows only, by id. A second attribute filter
    probes the value rows too; a sort by an attribute reads engine_instance_attributes."""
    now = T0 + timedelta(hours=1)
    for query, table in (
        (
            "workflow=ingest&status=complete&status=errored&attr=domain:a.com&sort=-duration",
            "engine_instance_attribute_values",
        ),
        ("attr=domain:a.com&attr=customer:c1&sort=started", "engine_instance_attribute_values"),
        ("status=complete&attr=domain:a.com&sort=-attr.customer", "engine_instance_attributes"),
    ):
        filters = InstanceFilters.from_query(QueryDict(query))
        assert attribute_rows_filtered(user=ledger, filters=filters) is not None
        assert (attribute_values_filtered(user=ledger, filters=filters) is not None) == (
            table == "engine_instance_attribute_values"
        )
        with CaptureQueriesContext(connection) as ctx:
            got = instance_list_counted(user=ledger, filters=filters, limit=4, now=now)
        expected = _straight(ledger, filters, now)
        assert expected and [r.id for r in got.page.rows] == expected[:4], query
        counting = [q["sql"] for q in ctx.captured_queries if "count(*)" in q["sql"]]
        assert len(counting) == 1
        tables = set(re.findall(r'"(engine_instance[a-z_]*)"', counting[0]))
        assert tables == {table}, (query, tables)
    # updated_at is not copied (every claim changes it): that sort reads the instances.
    by_updated = InstanceFilters.from_query(QueryDict("attr=domain:a.com&sort=-updated"))
    assert attribute_rows_filtered(user=ledger, filters=by_updated) is None
    assert attribute_values_filtered(user=ledger, filters=by_updated) is None


@pytest.mark.parametrize("query", [q for q in FILTERS if "attr=" in q])
def test_keyset_pages_counts_and_the_new_rows_count_over_attribute_rows_equal_the_plain_queries(ledger, query):
    filters = InstanceFilters.from_query(QueryDict(query))
    now = T0 + timedelta(hours=1)
    expected = _straight(ledger, filters, now)
    assert instance_count(user=ledger, filters=filters, now=now) == (len(expected), False)
    seen, cursor = [], None
    while True:
        page = instance_list(user=ledger, filters=filters, after=cursor, limit=2, now=now)
        seen += [r.id for r in page.rows]
        if page.next_cursor is None:
            break
        back = instance_list(user=ledger, filters=filters, before=page.next_cursor, limit=2, now=now)
        assert [r.id for r in back.rows] == expected[max(0, len(seen) - 3) : len(seen) - 1]
        cursor = page.next_cursor
    assert seen == expected
    if expected and "range=" not in query:  # the new rows' count measures range from the real now
        oldest = Instance.objects.get(id=expected[-1])
        assert instance_count_newer(user=ledger, filters=filters, than=Cursor.of(oldest)) == len(expected) - 1
    for sort in ("-duration", "started", "attr.customer", "-cost"):
        numbered = InstanceFilters.from_query(QueryDict(f"{query}&sort={sort}"))
        want = _straight(ledger, numbered, now)
        got = [
            r.id for p in (1, 2, 3) for r in instance_list(user=ledger, filters=numbered, limit=3, page=p, now=now).rows
        ]
        assert got == want[:9], sort
