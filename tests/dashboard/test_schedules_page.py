"""The schedules page: next fires, last result, enable/disable, run now and edit, from the
three personas' sides; a refused edit shows its error on the field and changes no row."""

from __future__ import annotations

from typing import Any
from zoneinfo import ZoneInfo

import pytest
from django.test import Client
from django.utils import timezone

from dashboard.models import AuditEntry
from ingest.engine.models import Instance
from ingest.triggers.models import Schedule
from ingest.triggers.services import schedule_create
from tests.triggers import support  # noqa: F401  (registers test-echo)

pytestmark = [pytest.mark.db, pytest.mark.django_db]


@pytest.fixture
def month_end(db: Any) -> Schedule:
    return schedule_create(
        name="month-end", workflow="test-echo", cron_expression="59 23 LW * *", tenant="acme", now=timezone.now()
    )


@pytest.fixture
def initech_nightly(db: Any) -> Schedule:
    return schedule_create(
        name="initech-nightly", workflow="test-echo", cron_expression="0 3 * * *", tenant="initech", now=timezone.now()
    )


def _form(**overrides: str) -> dict[str, str]:
    return {
        "cron": "59 23 LW * *",
        "timezone": "UTC",
        "missed_fire_policy": "skip",
        "catch_up_limit": "1",
        "params": "{}",
        **overrides,
    }


def test_the_list_shows_each_visible_schedule_with_five_next_fires(
    operator: Client, month_end: Schedule, initech_nightly: Schedule
) -> None:
    body = operator.get("/schedules/").content.decode()
    assert "month-end" in body and "59 23 LW * *" in body
    assert "initech-nightly" not in body
    row = body.split('data-schedule="month-end"')[1].split("</tr>")[0]
    assert row.count("<time") == 5 and "Run now" in row


def test_a_viewer_sees_schedules_without_actions_and_cannot_act(viewer: Client, month_end: Schedule) -> None:
    body = viewer.get("/schedules/").content.decode()
    assert "month-end" in body and "Run now" not in body
    assert viewer.post("/schedules/month-end/disable/").status_code == 403
    assert viewer.post("/schedules/month-end/run/").status_code == 403
    assert viewer.post("/schedules/month-end/save/", _form(cron="0 1 * * *")).status_code == 403
    schedule = Schedule.objects.get(name="month-end")
    assert schedule.enabled and schedule.cron == "59 23 LW * *" and not Instance.objects.exists()


def test_a_stranger_gets_404_for_another_tenants_schedule(stranger: Client, month_end: Schedule) -> None:
    assert stranger.get("/schedules/month-end/").status_code == 404
    assert stranger.post("/schedules/month-end/run/").status_code == 404
    assert "month-end" not in stranger.get("/schedules/").content.decode()
    assert not Instance.objects.exists()


def test_the_operator_disables_enables_and_runs_now_each_audited(operator: Client, month_end: Schedule) -> None:
    assert operator.post("/schedules/month-end/disable/").status_code == 302
    assert not Schedule.objects.get(name="month-end").enabled
    assert operator.post("/schedules/month-end/enable/").status_code == 302
    assert Schedule.objects.get(name="month-end").enabled
    assert operator.post("/schedules/month-end/run/").status_code == 302
    instance = Instance.objects.get()
    assert instance.id.startswith("month-end-manual-") and instance.tenant == "acme"
    assert list(AuditEntry.objects.order_by("id").values_list("action", flat=True)) == [
        "schedule.disable",
        "schedule.enable",
        "schedule.run",
    ]
    body = operator.get("/schedules/").content.decode()
    assert instance.id in body


def test_an_edit_saves_the_new_cron_and_moves_the_next_fire(operator: Client, month_end: Schedule) -> None:
    response = operator.post(
        "/schedules/month-end/save/", _form(cron="0 9 * * 5#3", timezone="Europe/Paris", params='{"region": "eu"}')
    )
    assert response.status_code == 302
    schedule = Schedule.objects.get(name="month-end")
    assert (schedule.cron, schedule.timezone, schedule.params) == ("0 9 * * 5#3", "Europe/Paris", {"region": "eu"})
    assert schedule.next_fire_at is not None
    local = schedule.next_fire_at.astimezone(ZoneInfo("Europe/Paris"))
    assert (local.weekday(), local.hour, 15 <= local.day <= 21) == (4, 9, True)  # the third Friday
    assert AuditEntry.objects.get().action == "schedule.update"


@pytest.mark.parametrize(
    "field, value, says",
    [
        ("cron", "61 * * * *", "is invalid"),
        ("cron", "0 3 * *", "has 4 fields"),
        ("timezone", "Mars/Olympus", "time zone"),
        ("params", "[1, 2]", "a JSON object is expected"),
        ("params", "{nope", "not valid JSON"),
        pytest.param("params", '{"n": ' + "9" * 5000 + "}", "holds an integer of 5,000 digits", id="long-number"),
        pytest.param("params", "[" * 5000 + "]" * 5000, "nests arrays and objects more than", id="deep-json"),
        ("catch_up_limit", "0", "greater than or equal to 1"),
    ],
)
def test_a_bad_edit_shows_the_error_on_its_field_and_changes_no_row(
    operator: Client, month_end: Schedule, field: str, value: str, says: str
) -> None:
    before = Schedule.objects.filter(name="month-end").values().get()
    response = operator.post("/schedules/month-end/save/", _form(**{field: value}))
    assert response.status_code == 400
    body = response.content.decode()
    assert says in body
    # The error sits inside the field's own block, and the typed value is kept for correcting.
    block = body.split(f'for="id_{field}"')[1].split('<div class="field')[0]
    assert "errorlist" in block
    assert Schedule.objects.filter(name="month-end").values().get() == before
    assert not AuditEntry.objects.exists()
