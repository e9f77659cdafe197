"""Schedules on the database: fires, deterministic ids, policies, run-now, enable/disable, races."""

from __future__ import annotations

import threading
from datetime import UTC, datetime, timedelta

import pytest
from django.db import connection

from ingest.engine.models import Instance
from ingest.engine.services import instances as engine_services
from ingest.triggers.errors import InvalidSchedule
from ingest.triggers.models import Schedule
from ingest.triggers.scheduler import Scheduler
from ingest.triggers.services import (
    schedule_create,
    schedule_run_now,
    schedule_set_enabled,
    schedule_update,
)

pytestmark = [pytest.mark.db, pytest.mark.django_db]
T0 = datetime(2026, 11, 22, 2, 59, 30, tzinfo=UTC)


def test_a_tick_fires_the_due_time_with_a_deterministic_id_and_schedule_info() -> None:
    schedule_create(
        name="nightly-sync",
        workflow="test-echo",
        cron_expression="0 3 * * *",
        params={"full": True},
        tenant="acme",
        now=T0,
    )
    assert Scheduler().tick(T0 + timedelta(seconds=20)) == []
    fired = Scheduler().tick(T0 + timedelta(seconds=31))
    assert fired == ["nightly-sync-20261122T0300Z"]
    instance = Instance.objects.get(pk=fired[0])
    assert instance.tenant == "acme" and instance.params["full"] is True
    assert instance.params["_schedule"] == {
        "cron": "0 3 * * *",
        "timezone": "UTC",
        "scheduled_time": "2026-11-22T03:00:00Z",
        "manual": False,
    }
    assert Scheduler().tick(T0 + timedelta(seconds=50)) == []
    assert Schedule.objects.get().next_fire_at == datetime(2026, 11, 23, 3, 0, tzinfo=UTC)


def test_a_crash_mid_fire_cannot_double_it() -> None:
    schedule_create(name="s", workflow="test-echo", cron_expression="* * * * *", now=T0)
    # The instance was created, then the process died before the schedule row was updated.
    engine_services.instance_create(workflow="test-echo", id="s-20261122T0300Z", params={})
    fired = Scheduler().tick(T0 + timedelta(seconds=31))
    assert fired == ["s-20261122T0300Z"]
    assert Instance.objects.count() == 1


def test_skip_and_catch_up_after_downtime() -> None:
    schedule_create(name="skip", workflow="test-echo", cron_expression="0 * * * *", now=T0)
    schedule_create(
        name="catch",
        workflow="test-echo",
        cron_expression="0 * * * *",
        now=T0,
        missed_fire_policy="catch_up",
        catch_up_limit=2,
    )
    fired = Scheduler().tick(T0 + timedelta(hours=5, minutes=30))
    assert sorted(fired) == ["catch-20261122T0700Z", "catch-20261122T0800Z"]


def test_run_now_and_disable_enable() -> None:
    schedule_create(name="hourly", workflow="test-echo", cron_expression="0 * * * *", now=T0)
    instance_id = schedule_run_now(name="hourly", now=T0)
    assert instance_id == "hourly-manual-20261122T025930Z"
    assert Instance.objects.get(pk=instance_id).params["_schedule"]["manual"] is True
    schedule_set_enabled(name="hourly", enabled=False, now=T0)
    assert Scheduler().tick(T0 + timedelta(hours=2)) == []
    schedule_set_enabled(name="hourly", enabled=True, now=T0 + timedelta(hours=2))
    # Re-enabling does not catch up the disabled period.
    assert Scheduler().tick(T0 + timedelta(hours=2, seconds=1)) == []
    assert Scheduler().tick(T0 + timedelta(hours=2, minutes=1)) == ["hourly-20261122T0500Z"]


def test_invalid_schedules_are_refused() -> None:
    with pytest.raises(InvalidSchedule, match="five fields") as refused:
        schedule_create(name="bad", workflow="test-echo", cron_expression="99 * * * *", now=T0)
    assert set(refused.value.problems) == {"cron"}
    with pytest.raises(InvalidSchedule, match="reserved"):
        schedule_create(name="bad", workflow="test-echo", cron_expression="* * * * *", now=T0, params={"_schedule": 1})
    with pytest.raises(InvalidSchedule, match="name"):
        schedule_create(name="bad name!", workflow="test-echo", cron_expression="* * * * *", now=T0)
    schedule_create(name="ok", workflow="test-echo", cron_expression="* * * * *", now=T0)
    with pytest.raises(InvalidSchedule, match="five fields"):
        schedule_update(name="ok", cron_expression="* *", now=T0)


def test_an_unknown_workflow_is_recorded_and_retried() -> None:
    # A schedule names a registered workflow when it is made; a deploy may remove that workflow later.
    schedule_create(name="ghost", workflow="test-echo", cron_expression="* * * * *", now=T0)
    Schedule.objects.filter(name="ghost").update(workflow="no-such-workflow")
    assert Scheduler().tick(T0 + timedelta(seconds=31)) == []
    schedule = Schedule.objects.get()
    assert "no-such-workflow" in schedule.last_error and schedule.next_fire_at <= T0 + timedelta(seconds=31)


def simulate(schedulers: list[Scheduler], *, minutes: int = 10, step_seconds: int = 5) -> list[str]:
    fired: list[str] = []
    for i in range(minutes * 60 // step_seconds):
        now = T0 + timedelta(seconds=31 + i * step_seconds)
        for scheduler in schedulers:
            fired.extend(scheduler.tick(now))
    return fired


def test_two_schedulers_ticking_in_turn_fire_each_minute_once() -> None:
    schedule_create(name="every-minute", workflow="test-echo", cron_expression="* * * * *", now=T0)
    simulate([Scheduler(), Scheduler()])
    ids = set(Instance.objects.values_list("id", flat=True))
    assert len(ids) == 10 == Instance.objects.count()
    assert "every-minute-20261122T0300Z" in ids and "every-minute-20261122T0309Z" in ids


@pytest.mark.postgres
@pytest.mark.django_db(transaction=True)
def test_two_scheduler_threads_race_over_ten_minutes_and_each_tick_fires_once(
    require_postgres: None,
) -> None:
    """Two schedulers, each on its own connection (as two processes), tick the same simulated
    instants at the same time for 10 minutes; the advisory lock elects one, ids dedupe the rest."""
    schedule_create(name="race", workflow="test-echo", cron_expression="* * * * *", now=T0)
    schedule_create(name="race2", workflow="test-echo", cron_expression="*/2 * * * *", now=T0)
    ticks = [T0 + timedelta(seconds=31 + i * 3) for i in range(200)]  # 10 minutes
    barrier = threading.Barrier(2)
    fired: list[list[str]] = [[], []]
    leaders: list[set[int]] = [set(), set()]

    def run(n: int) -> None:
        scheduler = Scheduler()
        try:
            for i, now in enumerate(ticks):
                barrier.wait(10)
                fired[n].extend(scheduler.tick(now))
                if scheduler._leading:
                    leaders[n].add(i)
                # Both have said whether they led this tick before either resigns: a resignation
                # (mid-run, or at the end) must not hand the lock over inside the same tick.
                barrier.wait(10)
                if n == 0 and i == 100:
                    scheduler.resign()  # hand over mid-run: the other takes the lead
        finally:
            scheduler.resign()
            connection.close()

    threads = [threading.Thread(target=run, args=(n,)) for n in (0, 1)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(120)
    all_fired = fired[0] + fired[1]
    assert len(all_fired) == len(set(all_fired)) == 15  # 10 + 5, each once
    assert Instance.objects.count() == 15
    assert not (leaders[0] & leaders[1])  # never two leaders at the same tick
