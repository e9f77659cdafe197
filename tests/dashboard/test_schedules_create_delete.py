"""Creating and deleting schedules in the console: every wrong field named at once in one 400
that changes nothing, a created schedule fires on its cron, a deletion asks first; audited; the
viewer and the stranger cannot."""

from __future__ import annotations

from typing import Any

import pytest
from django.test import Client
from django.utils import timezone

from dashboard.models import AuditEntry
from ingest.triggers.models import Schedule
from ingest.triggers.services import schedule_create
from tests.triggers import support  # noqa: F401  (registers test-echo)

pytestmark = [pytest.mark.db, pytest.mark.django_db]


def _new(**overrides: str) -> dict[str, str]:
    return {
        "name": "hourly-echo",
        "workflow": "test-echo",
        "tenant": "acme",
        "cron": "0 * * * *",
        "timezone": "Europe/Paris",
        "missed_fire_policy": "skip",
        "catch_up_limit": "1",
        "params": '{"n": 1}',
        "enabled": "on",
        **overrides,
    }


def test_an_operator_creates_a_schedule_that_is_listed_with_its_fires_and_audited(operator: Client) -> None:
    assert 'href="/schedules/new/"' in operator.get("/schedules/").content.decode()
    form = operator.get("/schedules/new/").content.decode()
    assert 'value="test-echo"' in form and 'value="initech"' not in form  # only tenants it operates
    response = operator.post("/schedules/new/create/", _new())
    assert response.status_code == 302 and response["Location"] == "/schedules/hourly-echo/"
    s = Schedule.objects.get(name="hourly-echo")
    assert (s.workflow, s.tenant, s.cron, s.timezone, s.params, s.enabled) == (
        "test-echo",
        "acme",
        "0 * * * *",
        "Europe/Paris",
        {"n": 1},
        True,
    )
    assert s.next_fire_at is not None and s.next_fire_at > timezone.now()
    entry = AuditEntry.objects.get()
    assert (entry.action, entry.actor, entry.tenants) == ("schedule.create", "operator", ["acme"])


def test_every_invalid_field_is_named_at_once_and_nothing_is_created(operator: Client) -> None:
    schedule_create(name="taken", workflow="test-echo", cron_expression="0 3 * * *", tenant="acme", now=timezone.now())
    response = operator.post(
        "/schedules/new/create/",
        _new(
            name="taken",
            workflow="no-such-flow",
            tenant="initech",
            cron="61 * * *",
            timezone="Mars/Olympus",
            catch_up_limit="0",
            params='{"_schedule": 1}',
        ),
    )
    assert response.status_code == 400
    errors = response.context["form"].errors
    assert set(errors) == {"name", "workflow", "tenant", "cron", "timezone", "catch_up_limit", "params"}
    body = response.content.decode()
    assert "already named" in body and "Mars/Olympus" in body and "7 fields to correct" in body
    assert Schedule.objects.count() == 1 and not AuditEntry.objects.exists()


def test_an_edit_names_every_wrong_field_at_once_too(operator: Client) -> None:
    schedule_create(
        name="month-end", workflow="test-echo", cron_expression="59 23 LW * *", tenant="acme", now=timezone.now()
    )
    before = Schedule.objects.filter(name="month-end").values().get()
    response = operator.post(
        "/schedules/month-end/save/",
        {
            "cron": "bad",
            "timezone": "Nowhere/Land",
            "missed_fire_policy": "skip",
            "catch_up_limit": "1",
            "params": "{}",
        },
    )
    assert response.status_code == 400 and set(response.context["form"].errors) == {"cron", "timezone"}
    assert Schedule.objects.filter(name="month-end").values().get() == before


def test_delete_asks_first_then_removes_the_schedule_and_is_audited(operator: Client) -> None:
    schedule_create(
        name="month-end", workflow="test-echo", cron_expression="59 23 LW * *", tenant="acme", now=timezone.now()
    )
    confirm = operator.get("/schedules/month-end/delete/")
    assert confirm.status_code == 200 and "Delete schedule" in confirm.content.decode()
    assert Schedule.objects.filter(name="month-end").exists()
    assert operator.get("/schedules/month-end/delete/run/").status_code == 405
    response = operator.post("/schedules/month-end/delete/run/")
    assert response.status_code == 302 and not Schedule.objects.filter(name="month-end").exists()
    entry = AuditEntry.objects.get()
    assert (entry.action, entry.selection["schedule"]) == ("schedule.delete", "month-end")


def test_a_viewer_and_a_stranger_can_neither_create_nor_delete(viewer: Client, stranger: Client, users: Any) -> None:
    schedule_create(
        name="month-end", workflow="test-echo", cron_expression="59 23 LW * *", tenant="acme", now=timezone.now()
    )
    assert 'href="/schedules/new/"' not in viewer.get("/schedules/").content.decode()
    assert viewer.get("/schedules/new/").status_code == 403
    assert viewer.post("/schedules/new/create/", _new()).status_code == 403
    assert viewer.post("/schedules/month-end/delete/run/").status_code == 403
    assert stranger.post("/schedules/new/create/", _new()).status_code == 400  # acme is not a choice
    assert stranger.get("/schedules/month-end/delete/").status_code == 404
    assert stranger.post("/schedules/month-end/delete/run/").status_code == 404
    assert list(Schedule.objects.values_list("name", flat=True)) == ["month-end"]
    assert not AuditEntry.objects.exists()
