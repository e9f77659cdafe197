"""The reconcile schedules: the scheduler's leader gives every tenant with a Gong or Salesforce
connection its `reconcile-<tenant>` schedule at the interval the setting names, and its fires
start `connections-reconcile` in that tenant."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from django.test import Client

from ingest.engine.models import Instance
from ingest.pipelines.models import Connection
from ingest.pipelines.services import connection_upsert
from ingest.triggers.models import Schedule
from ingest.triggers.scheduler import PURGE_EVERY, Scheduler
from ingest.triggers.services import schedule_create, schedule_set_enabled
from ingest.workflows.reconcile import WORKFLOW, reconcile_cron, reconcile_schedule_name
from tests.ingest.test_connection_secrets import _form, staff  # noqa: F401 - the staff persona

pytestmark = [pytest.mark.db, pytest.mark.django_db]
T0 = datetime(2026, 11, 22, 3, 1, 30, tzinfo=UTC)


def test_the_scheduler_gives_each_tenant_with_a_connection_its_schedule_and_fires_it(settings) -> None:
    settings.RUNLEDGER_RECONCILE_MINUTES = 5
    connection_upsert(tenant="acme", kind="gong", key="k", secret="s")
    connection_upsert(tenant="acme", kind="salesforce", key="c", secret="s")
    connection_upsert(tenant="globex", kind="llm", secret="sk")  # nothing to pull
    connection_upsert(tenant="initech", kind="gong", key="k", secret="s", enabled=False)

    scheduler = Scheduler()
    assert scheduler.tick(T0) == []

    schedule = Schedule.objects.get()
    assert (schedule.name, schedule.workflow, schedule.tenant, schedule.cron) == (
        "reconcile-acme",
        WORKFLOW,
        "acme",
        "*/5 * * * *",
    )
    fired = scheduler.tick(T0 + timedelta(minutes=4))  # 03:05
    assert fired == ["reconcile-acme-20261122T0305Z"]
    assert Instance.objects.get(id=fired[0]).workflow == WORKFLOW
    assert Instance.objects.get(id=fired[0]).tenant == "acme"


def test_a_changed_interval_reaches_the_schedule_and_an_operators_disable_is_kept(settings) -> None:
    connection_upsert(tenant="acme", kind="gong", key="k", secret="s")
    settings.RUNLEDGER_RECONCILE_MINUTES = 5
    scheduler = Scheduler()
    scheduler.tick(T0)
    schedule_set_enabled(name="reconcile-acme", enabled=False, now=T0)

    settings.RUNLEDGER_RECONCILE_MINUTES = 15
    scheduler.tick(T0 + timedelta(seconds=30))  # between upkeeps: nothing changes yet
    assert Schedule.objects.get().cron == "*/5 * * * *"
    scheduler.tick(T0 + PURGE_EVERY)

    schedule = Schedule.objects.get()
    assert schedule.cron == "*/15 * * * *" and not schedule.enabled


def test_a_schedule_of_that_name_for_something_else_is_left_alone(settings) -> None:
    schedule_create(name="reconcile-acme", workflow="url-classify", cron_expression="0 * * * *", tenant="acme", now=T0)
    connection_upsert(tenant="acme", kind="gong", key="k", secret="s")

    Scheduler().tick(T0)

    assert Schedule.objects.get().workflow == "url-classify"


@pytest.mark.pure
def test_names_and_crons_fit_what_schedules_take() -> None:
    long = "a-tenant-with-a-very-long-name-" * 4
    assert len(reconcile_schedule_name(long)) == 60
    assert reconcile_schedule_name(long) != reconcile_schedule_name(long + "x")
    assert reconcile_schedule_name("acme corp") == "reconcile-acme-corp"
    assert [reconcile_cron(m) for m in (1, 5, 60)] == ["* * * * *", "*/5 * * * *", "0 * * * *"]


def test_the_admin_refuses_pull_and_rate_limit_options_it_cannot_use_and_keeps_the_row(staff: Client) -> None:  # noqa: F811 - the fixture imported above
    row = connection_upsert(tenant="acme", kind="gong", key="k", secret="s", options={"workspace": "1"})
    url = f"/admin/ingest/connection/{row.pk}/change/"
    for options, says in (
        ('{"rate_limit": {"per_second": 0, "burst": 1}}', "per_second is 0"),
        ('{"reconcile_lookback_minutes": 5000}', "from 1 to 1439"),
        ('{"reconcile": "no"}', "reconcile is true or false"),
    ):
        page = staff.post(url, _form(row, options=options))
        assert page.status_code == 200 and says in page.content.decode()
        assert Connection.objects.get(pk=row.pk).options == {"workspace": "1"}
    good = '{"rate_limit": {"per_second": 2, "burst": 1}, "reconcile_lookback_minutes": 60}'
    assert staff.post(url, _form(row, options=good)).status_code == 302
    assert Connection.objects.get(pk=row.pk).options["reconcile_lookback_minutes"] == 60
