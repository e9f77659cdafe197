"""The follower loses no row: a history row that commits while a round reads is acted on, in
this round or the next, never passed over as seen."""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import pytest
from django.db import connection, connections
from django.utils import timezone

from ingest.alerts.follow import follow_round
from ingest.alerts.models import Alert, FollowState
from ingest.alerts.services import rule_save
from ingest.engine.models import History, HistoryKind
from ingest.engine.services.instances import instance_create

pytestmark = pytest.mark.django_db(transaction=True)
TABLE = History._meta.db_table


def _failed_row(instance_id: str) -> None:
    History.objects.create(
        instance_id=instance_id,
        workflow="alerts-test-fail",
        tenant="acme",
        kind=HistoryKind.INSTANCE_STATUS,
        status="errored",
        data={"error": "Declined", "message": "refused"},
        created_at=timezone.now(),
    )


def _committed_elsewhere(write: Callable[[], None]) -> None:
    """`write` on a connection of its own, committed before this returns (PostgreSQL: another
    session, as another worker's commit). SQLite lets one writer in at a time and the round holds
    the write lock, so there the row is written on the round's own connection: the round's next
    statement sees it and its previous one did not, which is the same race."""
    if connection.vendor != "postgresql":
        write()
        return
    failed: list[BaseException] = []

    def run() -> None:
        try:
            write()
        except BaseException as exc:  # noqa: BLE001 - re-raised in the test's thread
            failed.append(exc)
        finally:
            connections.close_all()

    thread = threading.Thread(target=run)
    thread.start()
    thread.join(30)
    assert not failed, failed


@contextmanager
def commit_after_first_read(write: Callable[[], None]) -> Iterator[list[str]]:
    """Runs `write` (committed) between the first statement of a round that reads history rows
    and the round's next statement (the first one's rows fetched by then)."""
    done: list[str] = []
    read: list[str] = []

    def wrapper(execute: Any, sql: str, params: Any, many: bool, context: Any) -> Any:
        if read and not done:
            done.append(read[0])
            _committed_elsewhere(write)
        if not read and sql.lstrip().upper().startswith("SELECT") and f'"{TABLE}"' in sql and '"kind"' in sql:
            read.append(sql)
        return execute(sql, params, many, context)

    with connection.execute_wrapper(wrapper):
        yield done


def _rule_and_failing_instance(channel):  # type: ignore[no-untyped-def]
    """An instance_failed rule on `channel` (throttled, so one alert counts every failure) and an
    instance of acme to fail."""
    rule = rule_save(
        tenant="acme",
        name="failures",
        condition="instance_failed",
        params={},
        channel_ids=[channel.id],
        throttle_seconds=3600,
        now=timezone.now(),
    )
    return rule, instance_create(workflow="alerts-test-fail", params={}, tenant="acme")


def test_a_failure_committed_while_a_round_reads_is_acted_on_not_passed_over(following, webhook_channel):
    rule, inst = _rule_and_failing_instance(webhook_channel)
    _failed_row(inst.id)
    with commit_after_first_read(lambda: _failed_row(inst.id)) as done:
        follow_round(now=timezone.now())
    assert done, "the round read no history row"
    while follow_round(now=timezone.now()):
        pass
    alert = Alert.objects.get(rule=rule)
    assert alert.count == 2  # both failures counted: the one written mid-round too
    top = History.objects.order_by("-id").values_list("id", flat=True).first()
    assert FollowState.objects.get(id=1).cursor == top


def test_a_burst_larger_than_a_batch_is_counted_whole_with_commits_landing_between_rounds(following, webhook_channel):
    rule, inst = _rule_and_failing_instance(webhook_channel)
    for _ in range(120):
        _failed_row(inst.id)
    for _ in range(5):  # each round has one more failure land between its reads
        with commit_after_first_read(lambda: _failed_row(inst.id)):
            follow_round(now=timezone.now())
    while follow_round(now=timezone.now()):
        pass
    assert Alert.objects.get(rule=rule).count == 125


def test_a_failure_whose_id_commits_after_a_higher_one_is_read_from_the_gaps(
    require_postgres, following, webhook_channel
):
    """PostgreSQL hands out ids at insert and rows become visible at commit: a round can read id
    n + 1 while n is still uncommitted. The cursor passes n, and n is read again once it lands."""
    from django.db import transaction

    # PostgreSQL only (require_postgres): SQLite has one writer at a time, so ids commit in order.
    rule, inst = _rule_and_failing_instance(webhook_channel)
    inserted, release, failed = threading.Event(), threading.Event(), []

    def slow_writer() -> None:
        try:
            with transaction.atomic():
                _failed_row(inst.id)
                inserted.set()
                release.wait(30)
        except BaseException as exc:  # noqa: BLE001 - re-raised in the test's thread
            failed.append(exc)
        finally:
            connections.close_all()

    thread = threading.Thread(target=slow_writer)
    thread.start()
    assert inserted.wait(30)
    _failed_row(inst.id)  # a higher id, committed first
    while follow_round(now=timezone.now()):
        pass
    assert Alert.objects.get(rule=rule).count == 1
    release.set()
    thread.join(30)
    assert not failed, failed
    while follow_round(now=timezone.now()):
        pass
    assert Alert.objects.get(rule=rule).count == 2
