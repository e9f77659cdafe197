"""Flow control in the claim: per-key concurrency limits, fairness, priorities, start_at,
start rate limits and the workflow-level timeout. SQLite by default; PostgreSQL with DATABASE_URL.

Limits are asserted on the ledger: the leases the claim granted, the instances' start times,
the order the steps ran in.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from ingest.engine import Workflow, create
from ingest.engine.clock import clock
from ingest.engine.errors import ConcurrencyLimitChanged, InvalidConcurrencyLimit, InvalidDuration
from ingest.engine.flow import cap_wake, deadline, rate_next_slot
from ingest.engine.models import ConcurrencyLimit, DeadLetter, Instance, Step
from ingest.engine.services import control, instances, limits
from ingest.engine.worker.turns import claim_batch, run_until_idle

RAN: list[str] = []
LEASE = timedelta(seconds=30)
T0 = datetime(2030, 1, 1, 12, 0, tzinfo=UTC)


@pytest.fixture(autouse=True)
def _reset():
    RAN.clear()


def record(ctx):
    RAN.append(ctx.instance_id)
    return ctx.instance_id


class PerTenant(Workflow):
    name = "t-flow-per-tenant"
    concurrency = 2
    concurrency_key = "tenant"

    def run(self, event, step):
        return step.do("work", record)


class OneAtATimeNapper(Workflow):
    name = "t-flow-napper"
    concurrency = 1

    def run(self, event, step):
        step.sleep("nap", "1 hour")
        return step.do("work", record)


class Plain(Workflow):
    name = "t-flow-plain"

    def run(self, event, step):
        return step.do("work", record)


class RateLimited(Workflow):
    name = "t-flow-rated"
    rate_limit = {"limit": 3, "period": "1 minute", "key": "account"}

    def run(self, event, step):
        step.sleep("between", "5 minutes")  # a re-claim after a sleep is not a new start
        return step.do("work", record)


class TimedOut(Workflow):
    name = "t-flow-timeout"
    timeout = "1 hour"

    def run(self, event, step):
        step.do("first", record, rollback=lambda ctx: RAN.append(f"undo:{ctx.instance_id}"))
        if event.payload.get("slow_step"):
            step.do("slow", lambda ctx: clock.advance(timedelta(hours=2)))
        else:
            step.sleep("long-nap", "2 hours")
        step.do("second", record)
        return "done"


def leased_by_key(workflow: str) -> dict[str, int]:
    now = clock.now()
    counts: dict[str, int] = {}
    for key in (
        Instance.objects.filter(workflow=workflow, lease_expires_at__gte=now)
        .exclude(lease_owner="")
        .values_list("concurrency_key", flat=True)
    ):
        counts[key] = counts.get(key, 0) + 1
    return counts


# ---- pure decisions ----------------------------------------------------------------------


@pytest.mark.pure
def test_the_next_rate_slot_opens_when_the_oldest_counted_start_leaves_the_window():
    minute = timedelta(minutes=1)
    starts = [T0, T0 + timedelta(seconds=10), T0 + timedelta(seconds=20)]
    assert rate_next_slot(starts, limit=3, period=minute, now=T0 + timedelta(seconds=30)) == T0 + minute
    assert rate_next_slot(starts, limit=2, period=minute, now=T0 + timedelta(seconds=30)) == T0 + timedelta(seconds=70)
    assert rate_next_slot(starts, limit=4, period=minute, now=T0 + timedelta(seconds=30)) is None
    assert rate_next_slot(starts, limit=3, period=minute, now=T0 + minute) is None  # T0 has left


@pytest.mark.pure
def test_a_suspension_is_cut_short_at_the_deadline_and_never_extended():
    assert cap_wake(T0 + timedelta(hours=2), deadline=T0 + timedelta(hours=1)) == T0 + timedelta(hours=1)
    assert cap_wake(T0, deadline=T0 + timedelta(hours=1)) == T0
    assert cap_wake(None, deadline=T0) == T0  # waiting on a child or an event without deadline
    assert cap_wake(None, deadline=None) is None
    assert deadline(started_at=T0, timeout=timedelta(hours=1)) == T0 + timedelta(hours=1)
    assert deadline(started_at=None, timeout=timedelta(hours=1)) is None


@pytest.mark.pure
def test_bad_flow_settings_fail_when_the_workflow_class_is_defined():
    with pytest.raises(InvalidDuration, match="timeout of workflow 't-flow-bad'"):
        type("Bad", (Workflow,), {"name": "t-flow-bad", "timeout": "soon", "run": Plain.run})
    with pytest.raises(ValueError, match="concurrency of workflow"):
        type("Bad", (Workflow,), {"name": "t-flow-bad", "concurrency": 0, "run": Plain.run})
    with pytest.raises(ValueError, match="same key"):
        type(
            "Bad",
            (Workflow,),
            {
                "name": "t-flow-bad",
                "concurrency": 2,
                "concurrency_key": "tenant",
                "rate_limit": {"limit": 1, "period": "1 minute", "key": "account"},
            },
        )
    with pytest.raises(ValueError, match="declares no concurrency_key"):
        type("Bad", (Workflow,), {"name": "t-flow-bad", "concurrency_overrides": {"acme": 2}, "run": Plain.run})
    with pytest.raises(ValueError, match="'acme' maps to 0"):
        type(
            "Bad",
            (Workflow,),
            {"name": "t-flow-bad", "concurrency_key": "tenant", "concurrency_overrides": {"acme": 0}, "run": Plain.run},
        )
    with pytest.raises(ValueError, match="'limit', 'period'"):
        type("Bad", (Workflow,), {"name": "t-flow-bad", "rate_limit": {"limit": 1, "every": "1 minute"}})


# ---- concurrency limits ------------------------------------------------------------------


@pytest.mark.django_db
def test_a_per_key_limit_leases_at_most_n_per_key_whichever_worker_asks():
    for i in range(6):
        create("t-flow-per-tenant", id=f"a-{i}", tenant="acme")
    for i in range(3):
        create("t-flow-per-tenant", id=f"b-{i}", tenant="blue")
    _, first = claim_batch(worker_id="w1", limit=50, lease=LEASE)
    _, second = claim_batch(worker_id="w2", limit=50, lease=LEASE)
    assert len(first) == 4 and second == []
    assert leased_by_key("t-flow-per-tenant") == {"acme": 2, "blue": 2}


class DeclaredOverride(Workflow):
    name = "t-flow-declared-override"
    concurrency = 2
    concurrency_key = "tenant"
    concurrency_overrides = {"blue": 3}

    def run(self, event, step):
        return step.do("work", record)


def _backlog(workflow: str, **counts: int) -> None:
    for tenant, n in counts.items():
        instances.instance_create_batch(
            workflow=workflow, items=[{"id": f"{tenant}-{i}", "tenant": tenant} for i in range(n)]
        )


@pytest.mark.django_db
def test_an_operators_limit_caps_one_tenant_and_the_others_keep_the_workflows_cap():
    _backlog("t-flow-per-tenant", acme=8, blue=8, cyan=8)
    limits.concurrency_limit_set(workflow="t-flow-per-tenant", key="acme", max_concurrent=5, actor="ops")
    limits.concurrency_limit_set(workflow="t-flow-per-tenant", key="blue", max_concurrent=1, actor="ops")
    _, first = claim_batch(worker_id="w1", limit=50, lease=LEASE)
    _, second = claim_batch(worker_id="w2", limit=50, lease=LEASE)
    assert len(first) == 8 and second == []
    assert leased_by_key("t-flow-per-tenant") == {"acme": 5, "blue": 1, "cyan": 2}


@pytest.mark.django_db
def test_a_limit_caps_a_tenant_of_a_workflow_that_has_no_cap_of_its_own():
    _backlog("t-flow-fair-only", acme=30, blue=30)
    limits.concurrency_limit_set(workflow="t-flow-fair-only", key="acme", max_concurrent=3, actor="ops")
    _, leased = claim_batch(worker_id="w1", limit=40, lease=LEASE)
    assert leased_by_key("t-flow-fair-only") == {"acme": 3, "blue": 30}
    assert len(leased) == 33


@pytest.mark.django_db
def test_a_declared_override_applies_until_an_operators_limit_replaces_it_and_again_once_removed():
    _backlog("t-flow-declared-override", acme=6, blue=6)
    _, leased = claim_batch(worker_id="w1", limit=50, lease=LEASE)
    assert leased_by_key("t-flow-declared-override") == {"acme": 2, "blue": 3}
    Instance.objects.update(lease_owner="", lease_token="", lease_expires_at=None)
    limits.concurrency_limit_set(workflow="t-flow-declared-override", key="blue", max_concurrent=5, actor="ops")
    claim_batch(worker_id="w2", limit=50, lease=LEASE)
    assert leased_by_key("t-flow-declared-override") == {"acme": 2, "blue": 5}
    Instance.objects.update(lease_owner="", lease_token="", lease_expires_at=None)
    limits.concurrency_limit_delete(workflow="t-flow-declared-override", key="blue", actor="ops")
    claim_batch(worker_id="w3", limit=50, lease=LEASE)
    assert leased_by_key("t-flow-declared-override") == {"acme": 2, "blue": 3}


@pytest.mark.django_db
def test_a_limit_is_refused_for_a_bad_field_or_a_version_that_moved_and_nothing_changes():
    with pytest.raises(InvalidConcurrencyLimit, match="workflow 't-flow-plain'") as bad:
        limits.concurrency_limit_set(workflow="t-flow-plain", key="acme", max_concurrent=2, actor="ops")
    assert set(bad.value.problems) == {"workflow"}  # a workflow without a concurrency key has no tenants to cap
    with pytest.raises(InvalidConcurrencyLimit, match="max_concurrent") as bad:
        limits.concurrency_limit_set(workflow="t-flow-per-tenant", key="acme", max_concurrent=0, actor="ops")
    assert set(bad.value.problems) == {"max_concurrent"}
    with pytest.raises(InvalidConcurrencyLimit) as bad:
        limits.concurrency_limit_set(workflow="nope", key=" acme", max_concurrent=True, actor="ops")
    assert set(bad.value.problems) == {"workflow", "tenant", "max_concurrent"}  # every wrong field, at once
    row = limits.concurrency_limit_set(
        workflow="t-flow-per-tenant", key="acme", max_concurrent=2, actor="ann", version="0"
    )
    shown = limits.limit_version(row)
    clock.advance(timedelta(seconds=1))
    limits.concurrency_limit_set(workflow="t-flow-per-tenant", key="acme", max_concurrent=4, actor="bob", version=shown)
    with pytest.raises(ConcurrencyLimitChanged, match="set to 4 by bob"):
        limits.concurrency_limit_set(
            workflow="t-flow-per-tenant", key="acme", max_concurrent=9, actor="ann", version=shown
        )
    with pytest.raises(ConcurrencyLimitChanged):
        limits.concurrency_limit_delete(workflow="t-flow-per-tenant", key="acme", actor="ann", version=shown)
    assert list(ConcurrencyLimit.objects.values_list("key", "max_concurrent", "updated_by")) == [("acme", 4, "bob")]


@pytest.mark.django_db
def test_a_slot_frees_when_a_turn_ends_or_its_lease_expires():
    for i in range(4):
        create("t-flow-per-tenant", id=f"a-{i}", tenant="acme")
    token, ids = claim_batch(worker_id="w1", limit=50, lease=LEASE)
    assert len(ids) == 2
    Instance.objects.filter(id=ids[0]).update(
        status="complete", ready_at=None, lease_owner="", lease_token="", lease_expires_at=None
    )  # its turn finished it
    _, more = claim_batch(worker_id="w2", limit=50, lease=LEASE)
    assert len(more) == 1 and more[0] not in ids
    clock.advance(LEASE + timedelta(seconds=1))  # w1 and w2 died: both leases expire
    _, after = claim_batch(worker_id="w3", limit=50, lease=LEASE)
    assert len(after) == 2
    assert leased_by_key("t-flow-per-tenant") == {"acme": 2}


@pytest.mark.django_db
def test_sleeping_instances_hold_no_slot():
    for i in range(3):
        create("t-flow-napper", id=f"nap-{i}")
    run_until_idle()
    assert set(Instance.objects.values_list("status", flat=True)) == {"waiting"}
    assert Step.objects.filter(name="nap").count() == 3  # all three started under a limit of 1
    run_until_idle(advance_clock=True)
    assert set(Instance.objects.values_list("status", flat=True)) == {"complete"}


@pytest.mark.django_db
def test_unlimited_workflows_are_claimed_beside_limited_ones():
    for i in range(4):
        create("t-flow-per-tenant", id=f"a-{i}", tenant="acme")
        create("t-flow-plain", id=f"p-{i}")
    _, ids = claim_batch(worker_id="w1", limit=50, lease=LEASE)
    assert sorted(ids) == ["a-0", "a-1", "p-0", "p-1", "p-2", "p-3"]


# ---- fairness and priorities -------------------------------------------------------------


@pytest.mark.django_db
def test_a_small_tenant_is_served_round_robin_beside_a_large_backlog():
    instances.instance_create_batch(
        workflow="t-flow-per-tenant", items=[{"id": f"a-{i:02}", "tenant": "acme"} for i in range(60)]
    )
    instances.instance_create_batch(
        workflow="t-flow-per-tenant", items=[{"id": f"b-{i}", "tenant": "blue"} for i in range(10)]
    )
    run_until_idle()
    assert len(RAN) == 70
    last_b = max(i for i, iid in enumerate(RAN) if iid.startswith("b-"))
    assert last_b < 21, RAN[:25]  # one claim at a time still alternates between the keys
    # FIFO within a key (one batch shares a timestamp: the id breaks the tie)
    assert [i for i in RAN if i.startswith("a-")] == [f"a-{i:02}" for i in range(60)]


class FairOnly(Workflow):
    name = "t-flow-fair-only"
    concurrency_key = "tenant"

    def run(self, event, step):
        return step.do("work", record)


@pytest.mark.django_db
def test_a_key_without_a_cap_is_still_served_round_robin_and_runs_unbounded():
    instances.instance_create_batch(
        workflow="t-flow-fair-only", items=[{"id": f"a-{i:02}", "tenant": "acme"} for i in range(40)]
    )
    instances.instance_create_batch(
        workflow="t-flow-fair-only", items=[{"id": f"b-{i}", "tenant": "blue"} for i in range(5)]
    )
    run_until_idle()
    assert len(RAN) == 45
    assert max(i for i, iid in enumerate(RAN) if iid.startswith("b-")) < 10, RAN  # alternates, one at a time
    instances.instance_create_batch(
        workflow="t-flow-fair-only", items=[{"id": f"c-{i:02}", "tenant": "acme"} for i in range(30)]
    )
    _, leased = claim_batch(worker_id="w", limit=30, lease=LEASE)
    assert len(leased) == 30  # no cap: one claim takes as many as it asks for


@pytest.mark.django_db
def test_a_fair_claim_hands_each_instance_its_row_as_leased_so_the_turn_reads_it_no_more(require_postgres):
    # PostgreSQL's claim only: SQLite's hands over ids, and its turn reads the row in the claim's transaction.
    from ingest.engine.worker import turns
    from ingest.engine.worker.database import instance_from_row

    items = [
        {"id": f"r-{i}", "tenant": tenant, "params": {"n": i}}
        for i, tenant in enumerate(["acme", "blue", "acme", "blue"])
    ]
    instances.instance_create_batch(workflow="t-flow-fair-only", items=items)
    _, claimed = turns.claim(worker_id="w-rows", limit=3, lease=LEASE)
    assert len(claimed) == 3
    fields = ["id", "workflow", "tenant", "status", "params", "lease_owner", "lease_token", "lease_expires_at"]
    for c in claimed:
        assert c.row is not None and c.has_steps is False, c
        handed = instance_from_row(c.row)
        stored = Instance.objects.get(id=c.id)
        assert [getattr(handed, f) for f in fields] == [getattr(stored, f) for f in fields]
        assert handed.lease_owner == "w-rows" and handed.params["n"] == int(c.id.split("-")[1])


@pytest.mark.django_db
def test_a_fair_backlog_without_a_cap_does_not_starve_unlimited_work():
    instances.instance_create_batch(
        workflow="t-flow-fair-only", items=[{"id": f"a-{i:02}", "tenant": "acme"} for i in range(20)]
    )
    create("t-flow-plain", id="p-1")
    create("t-flow-plain", id="p-2")
    _, leased = claim_batch(worker_id="w", limit=3, lease=LEASE)
    assert set(leased) >= {"p-1", "p-2"} and len(leased) == 3


def test_the_shipped_workflows_serve_their_tenants_round_robin():
    from ingest.engine import flow
    from ingest.engine.workflow import get_workflow

    shipped = ["gong-ingest", "salesforce-ingest", "domain-onboard", "url-classify"]
    classes = [get_workflow(name) for name in shipped]
    assert [cls.concurrency_key for cls in classes] == ["tenant"] * 4
    assert [lim.workflow for lim in flow.claim_limits(classes, now=T0)] == sorted(shipped)


@pytest.mark.django_db
def test_priorities_order_instances_within_a_key_and_across_keys():
    create("t-flow-per-tenant", id="a-low", tenant="acme", priority=0)
    create("t-flow-per-tenant", id="a-high", tenant="acme", priority=5)
    create("t-flow-per-tenant", id="a-mid", tenant="acme", priority=1)
    create("t-flow-per-tenant", id="b-top", tenant="blue", priority=9)
    create("t-flow-plain", id="p-low", priority=0)
    create("t-flow-plain", id="p-high", priority=3)
    run_until_idle()
    assert RAN.index("b-top") < RAN.index("a-high") < RAN.index("a-mid") < RAN.index("a-low")
    assert RAN.index("p-high") < RAN.index("p-low")


@pytest.mark.django_db
def test_an_instance_with_start_at_is_not_claimed_before_it():
    clock.freeze(T0)
    create("t-flow-plain", id="later", start_at=T0 + timedelta(hours=1))
    create("t-flow-plain", id="now")
    run_until_idle()
    assert RAN == ["now"]
    assert Instance.objects.get(id="later").status == "queued"
    run_until_idle(advance_clock=True)
    later = Instance.objects.get(id="later")
    assert later.status == "complete" and later.started_at >= T0 + timedelta(hours=1)


# ---- rate limits -------------------------------------------------------------------------


@pytest.mark.django_db
def test_starts_beyond_the_rate_wait_for_the_window_and_restarts_after_sleeps_do_not_count():
    clock.freeze(T0)
    for i in range(8):
        create("t-flow-rated", id=f"x-{i}", params={"account": "x"})
    create("t-flow-rated", id="y-0", params={"account": "y"})
    run_until_idle()
    started = Instance.objects.filter(started_at__isnull=False)
    assert sorted(started.values_list("id", flat=True)) == ["x-0", "x-1", "x-2", "y-0"]
    waiting = Instance.objects.filter(started_at__isnull=True)
    assert set(waiting.values_list("ready_at", flat=True)) == {T0 + timedelta(minutes=1)}
    run_until_idle(advance_clock=True)
    assert Instance.objects.filter(status="complete").count() == 9
    starts = sorted(Instance.objects.filter(concurrency_key="x").values_list("started_at", flat=True))
    for i, start in enumerate(starts):
        in_window = [s for s in starts if start <= s < start + timedelta(minutes=1)]
        assert len(in_window) <= 3, (i, starts)
    # 3, 3, 2: no slot wasted (run_until_idle steps a microsecond past each wake-up)
    assert starts[-1] - (T0 + timedelta(minutes=2)) < timedelta(milliseconds=1)


# ---- workflow timeout --------------------------------------------------------------------


@pytest.mark.django_db
def test_a_sleeping_instance_wakes_at_its_deadline_to_fail_with_a_clear_error():
    clock.freeze(T0)
    create("t-flow-timeout", id="late-1")
    run_until_idle()
    inst = Instance.objects.get(id="late-1")
    assert inst.status == "waiting" and inst.ready_at == T0 + timedelta(hours=1)  # not 2 hours
    run_until_idle(advance_clock=True)
    inst.refresh_from_db()
    assert inst.status == "errored" and inst.error_name == "WorkflowTimeout"
    assert inst.ended_at - (T0 + timedelta(hours=1)) < timedelta(milliseconds=1)
    assert "late-1" in inst.error_message and "'t-flow-timeout'" in inst.error_message
    assert "timeout of 1 hour" in inst.error_message
    assert RAN == ["late-1", "undo:late-1"]  # 'second' never ran; the rollback did
    assert DeadLetter.objects.get(instance_id="late-1").error_name == "WorkflowTimeout"


@pytest.mark.django_db
def test_the_timeout_stops_the_instance_at_the_next_step_boundary():
    clock.freeze(T0)
    create("t-flow-timeout", id="late-2", params={"slow_step": True})
    run_until_idle()
    inst = Instance.objects.get(id="late-2")
    assert inst.status == "errored" and inst.error_name == "WorkflowTimeout"
    assert list(Step.objects.filter(instance_id="late-2").order_by("position").values_list("name", "status")) == [
        ("first", "complete"),
        ("slow", "complete"),
        ("rollback:first", "complete"),
    ]


@pytest.mark.django_db
def test_a_restart_after_a_timeout_gets_a_fresh_clock():
    clock.freeze(T0)
    create("t-flow-timeout", id="late-3")
    run_until_idle(advance_clock=True)
    assert Instance.objects.get(id="late-3").error_name == "WorkflowTimeout"
    clock.advance(timedelta(days=1))
    control.instance_restart(instance_id="late-3", actor="op")
    run_until_idle()
    inst = Instance.objects.get(id="late-3")
    assert inst.status == "waiting" and inst.ready_at == clock.now() + timedelta(hours=1)
