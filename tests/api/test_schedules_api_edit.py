"""PATCH /api/schedules/<name>: the page's edit over the API, with the seeds' Quartz cron,
JSON errors that change no row, and the three personas' sides."""

from __future__ import annotations

from typing import Any

import pytest
from django.test import Client
from django.utils import timezone

from dashboard.models import AuditEntry
from ingest.triggers.models import Schedule
from ingest.triggers.services import schedule_create
from tests.api.conftest import ApiClient

pytestmark = [pytest.mark.db, pytest.mark.django_db]


@pytest.fixture
def nightly(db: Any) -> Schedule:
    return schedule_create(
        name="nightly", workflow="test-echo", cron_expression="0 3 * * *", tenant="acme", now=timezone.now()
    )


def patch(client: ApiClient, body: dict[str, Any]) -> Any:
    return client.client.patch("/api/schedules/nightly", body, content_type="application/json", headers=client.headers)


def test_an_operator_sets_seed_001s_last_weekday_cron(operator: ApiClient, nightly: Schedule) -> None:
    answer = patch(operator, {"cron": "59 23 LW * *", "missed_fire_policy": "catch_up", "catch_up_limit": 2})
    assert answer.status_code == 200, answer.content
    fires = answer.json()["next_fires"]
    assert len(fires) == 5 and all(f.endswith("23:59:00Z") for f in fires)
    row = Schedule.objects.get(name="nightly")
    assert (row.cron, row.missed_fire_policy, row.catch_up_limit) == ("59 23 LW * *", "catch_up", 2)
    assert AuditEntry.objects.get().action == "schedule.update"


@pytest.mark.parametrize(
    "body, status, code",
    [
        ({"cron": "61 * * * *"}, 400, "invalid_schedule"),
        ({"timezone": "Mars/Olympus"}, 400, "invalid_schedule"),
        ({"missed_fire_policy": "later"}, 400, "invalid_schedule"),
        ({"params": {"_schedule": 1}}, 400, "invalid_schedule"),
        ({"catch_up_limit": 0}, 400, "invalid_schedule"),
        ({"catch_up_limit": "3"}, 400, "invalid_schedule"),
        ({"cron": "0 4 * * *", "surprise": 1}, 422, None),
        ({}, 400, "nothing_to_change"),
    ],
)
def test_a_bad_edit_is_a_json_error_that_changes_no_row(
    operator: ApiClient, nightly: Schedule, body: dict[str, Any], status: int, code: str | None
) -> None:
    before = Schedule.objects.filter(name="nightly").values().get()
    answer = patch(operator, body)
    assert answer.status_code == status and "message" in answer.json()["error"]
    if code:
        assert answer.json()["error"]["code"] == code
    if code == "invalid_schedule":  # the wrong field is named by its name
        assert set(answer.json()["error"]["fields"]) == set(body)
    assert Schedule.objects.filter(name="nightly").values().get() == before and not AuditEntry.objects.exists()


def test_a_viewer_gets_403_and_a_stranger_404(viewer: ApiClient, stranger: ApiClient, nightly: Schedule) -> None:
    assert patch(viewer, {"cron": "0 4 * * *"}).status_code == 403
    assert patch(stranger, {"cron": "0 4 * * *"}).json()["error"]["code"] == "schedule_not_found"
    assert Schedule.objects.get(name="nightly").cron == "0 3 * * *"


@pytest.mark.parametrize("raw", [b"", b"{", b"[1, 2]", b"null"])
def test_a_missing_or_malformed_body_is_a_json_error_that_changes_no_row(
    operator: ApiClient, nightly: Schedule, raw: bytes
) -> None:
    """What the REST fuzz found: a PATCH with no body (or not an object) is refused, not obeyed."""
    before = Schedule.objects.filter(name="nightly").values().get()
    answer = operator.client.generic(
        "PATCH", "/api/schedules/nightly", raw, content_type="application/json", headers=operator.headers
    )
    assert answer.status_code in (400, 422) and answer.json()["error"]["message"]
    assert Schedule.objects.filter(name="nightly").values().get() == before and not AuditEntry.objects.exists()


def test_a_disabled_schedule_for_february_31st_is_enabled_and_said_to_never_fire(operator: ApiClient) -> None:
    """The strict run's find: enabling a schedule whose expression matches no date answered 500."""
    schedule_create(
        name="never",
        workflow="test-echo",
        cron_expression="0 0 31 2 *",
        tenant="acme",
        enabled=False,
        now=timezone.now(),
    )
    answer = operator.post("/api/schedules/never/enable")
    assert answer.status_code == 200, answer.content
    assert answer.json()["enabled"] is True and answer.json()["next_fires"] == []
    row = Schedule.objects.get(name="never")
    assert row.enabled and row.next_fire_at is None
    console = Client()
    assert console.login(username="op", password="pw-op")
    page = console.get("/schedules/never/")
    assert page.status_code == 200 and b"matches no date" in page.content
