"""The workers page: a real worker's heartbeat row, its slots, what it runs now (only the
reader's tenants by id), heartbeat age, and live, silent and stopped told apart."""

from __future__ import annotations

import time
from datetime import timedelta
from typing import Any

import pytest
from django.test import Client
from django.utils import timezone

from dashboard.selectors.workers import worker_state
from ingest.engine.models import Instance, WorkerHeartbeat
from ingest.engine.sql import workers as sql_workers
from ingest.engine.worker.loop import Worker

pytestmark = [pytest.mark.db, pytest.mark.django_db]


def _hold(instance_id: str, *, tenant: str, owner: str) -> None:
    now = timezone.now()
    Instance.objects.create(
        id=instance_id,
        workflow="test-echo",
        tenant=tenant,
        status="running",
        created_at=now,
        updated_at=now,
        started_at=now,
        lease_owner=owner,
        lease_token="t",
        lease_expires_at=now + timedelta(seconds=30),
    )


@pytest.mark.django_db(transaction=True)  # the heartbeat thread writes on its own connection
def test_a_started_worker_beats_its_row_and_marks_it_stopped() -> None:
    worker = Worker(concurrency=3, worker_id="w-test-1", lease_seconds=0.6, poll_seconds=0.05).start()
    try:
        row = WorkerHeartbeat.objects.get(pk="w-test-1")
        assert row.slots == 3 and row.stopped_at is None and row.pid > 0
        first = row.beat_at
        deadline = time.monotonic() + 30  # it beats every 0.2 s (a third of its lease)
        while WorkerHeartbeat.objects.get(pk="w-test-1").beat_at == first and time.monotonic() < deadline:
            time.sleep(0.05)
        assert WorkerHeartbeat.objects.get(pk="w-test-1").beat_at > first
    finally:
        worker.stop(timeout=2)
    assert WorkerHeartbeat.objects.get(pk="w-test-1").stopped_at is not None


def test_the_page_shows_slots_age_and_only_the_readers_instances(operator: Client, stranger: Client) -> None:
    now = timezone.now()
    sql_workers.worker_beat(worker_id="host-a:1:abc", host="host-a", pid=1, slots=4, now=now - timedelta(seconds=3))
    _hold("acme-run-1", tenant="acme", owner="host-a:1:abc")
    _hold("initech-run-1", tenant="initech", owner="host-a:1:abc")
    body = operator.get("/workers/").content.decode()
    row = body.split('data-worker="host-a:1:abc"')[1].split("</tr>")[0]
    assert "2 / 4" in row and "acme-run-1" in row and "initech-run-1" not in row
    assert "1 instance of other tenants" in row and ">live<" in row
    age = int(row.split('data-age="')[1].split('"')[0])
    assert 3 <= age <= 30
    strangers = stranger.get("/workers/").content.decode().split('data-worker="host-a:1:abc"')[1].split("</tr>")[0]
    assert "initech-run-1" in strangers and "acme-run-1" not in strangers


def test_silent_and_stopped_workers_are_told_apart() -> None:
    now, lease = timezone.now(), timedelta(seconds=30)
    assert worker_state(beat_at=now - timedelta(seconds=29), stopped_at=None, now=now, lease=lease) == "live"
    assert worker_state(beat_at=now - timedelta(seconds=31), stopped_at=None, now=now, lease=lease) == "silent"
    assert worker_state(beat_at=now, stopped_at=now, now=now, lease=lease) == "stopped"


def test_workers_gone_a_day_are_forgotten_at_the_next_start(viewer: Client) -> None:
    now = timezone.now()
    sql_workers.worker_beat(worker_id="old", host="h", pid=1, slots=1, now=now - timedelta(days=2))
    sql_workers.worker_beat(worker_id="recent", host="h", pid=2, slots=1, now=now - timedelta(minutes=5))
    assert sql_workers.workers_forget(now=now) == 1
    assert list(WorkerHeartbeat.objects.values_list("worker_id", flat=True)) == ["recent"]
    assert "recent" in viewer.get("/workers/").content.decode()


def test_the_page_needs_a_sign_in(db: Any) -> None:
    assert Client().get("/workers/").status_code == 302
