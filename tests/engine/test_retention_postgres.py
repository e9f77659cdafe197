"""PostgreSQL only: a retention batch never waits on a row another transaction holds (a worker
or an operator on the same instance); it skips that instance and purges the rest."""

from __future__ import annotations

import threading
from datetime import timedelta

import pytest
from django.db import connection, transaction
from django.utils import timezone

from ingest.engine.models import Instance
from ingest.engine.services.retention import retention_purge_batch

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.usefixtures("require_postgres")]

HOLD_SECONDS = 120.0  # a batch that waited on the lock would return only after this


def test_a_batch_skips_a_locked_instance_without_waiting(tmp_path):
    ended = timezone.now() - timedelta(days=40)
    for i in range(3):
        Instance.objects.create(
            id=f"lk-{i}",
            workflow="ret-pg",
            tenant="acme",
            status="complete",
            params={},
            created_at=ended,
            updated_at=ended,
            ended_at=ended,
        )
    locked, release, let_go = threading.Event(), threading.Event(), threading.Event()

    def hold_lock() -> None:
        try:
            with transaction.atomic():
                Instance.objects.select_for_update().get(id="lk-1")
                locked.set()
                release.wait(HOLD_SECONDS)
                let_go.set()  # the lock ends with this transaction, released or timed out
        finally:
            connection.close()

    holder = threading.Thread(target=hold_lock)
    holder.start()
    try:
        assert locked.wait(60)
        purged = retention_purge_batch(workflow="ret-pg", now=timezone.now(), archive_dir=tmp_path)
        # The batch returned while the lock was still held: it did not wait for it.
        still_locked = not let_go.is_set()
    finally:
        release.set()
        holder.join(HOLD_SECONDS)
    assert purged == 2 and still_locked
    assert list(Instance.objects.values_list("id", flat=True)) == ["lk-1"]
