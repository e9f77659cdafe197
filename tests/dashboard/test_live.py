"""The live path: the follower's gap bookkeeping, and the websocket consumer's access rules,
resume from the last event id, and throttling."""

from __future__ import annotations

import asyncio
import re

import pytest
from asgiref.sync import sync_to_async
from channels.auth import AuthMiddlewareStack
from channels.layers import get_channel_layer
from channels.routing import URLRouter
from channels.testing import WebsocketCommunicator
from django.utils import timezone
from ledger_factories import add_history, make_instance

from dashboard.consumers import MIN_INTERVAL
from dashboard.live import follower as follower_module
from dashboard.live.feed import FeedState, feed_advance
from dashboard.live.follower import HistoryFollower, close_follower_connections
from dashboard.routing import websocket_urlpatterns
from ingest.engine.models import History, Instance

CURSOR = re.compile(r'data-live-cursor="(\d+)"')


# ---- pure: which ids are new ---------------------------------------------------------------


@pytest.mark.pure
def test_a_lower_id_that_commits_late_is_still_delivered():
    state, fresh = feed_advance(FeedState(cursor=40), [41, 43], now=0.0)
    assert fresh == [41, 43] and state.cursor == 43 and set(state.gaps) == {42}
    state, fresh = feed_advance(state, [42, 44], now=1.0)
    assert fresh == [42, 44] and state.gaps == {}


@pytest.mark.pure
def test_rows_already_seen_are_not_delivered_twice():
    state, _ = feed_advance(FeedState(cursor=0), [1, 2, 3], now=0.0)
    state, fresh = feed_advance(state, [2, 3, 4], now=0.1)
    assert fresh == [4]


@pytest.mark.pure
def test_a_hole_left_by_a_rollback_is_forgotten_after_a_while():
    state, _ = feed_advance(FeedState(cursor=0), [1, 3], now=0.0, keep_seconds=10)
    assert 2 in state.gaps
    state, _ = feed_advance(state, [], now=11.0, keep_seconds=10)
    assert state.gaps == {}


# ---- consumer ------------------------------------------------------------------------------

pytestmark_db = pytest.mark.django_db(transaction=True)
PUSH_WAIT = 30.0  # a push that is coming arrives long before this on any machine


@pytest.fixture
def live_settings(settings):
    settings.RUNLEDGER_LIVE_FOLLOWER = False  # the tests drive the follower by hand
    return settings


@pytest.fixture
def people(transactional_db, live_settings):
    from django.contrib.auth import get_user_model

    from dashboard.access import demo_users_ensure

    demo_users_ensure()
    return {u.username: u for u in get_user_model().objects.all()}


async def _connect(user, query: str):
    comm = WebsocketCommunicator(URLRouter(websocket_urlpatterns), f"/ws/live/?{query}")
    comm.scope["user"] = user
    connected, code = await comm.connect()
    return comm, connected, code


async def _drain(comm, seconds: float, *, until: int | None = None) -> list[str]:
    """Messages pushed within `seconds` (or as soon as `until` of them arrived)."""
    out: list[str] = []
    loop = asyncio.get_running_loop()
    end = loop.time() + seconds
    # Not receive_from(timeout=...): a timeout there cancels the consumer under test.
    while loop.time() < end and (until is None or len(out) < until):
        if comm.output_queue.empty():
            await asyncio.sleep(0.01)
            continue
        out.append((await comm.receive_output())["text"])
    return out


@pytest.fixture
async def layer():
    layer = get_channel_layer()
    await layer.flush()
    yield layer
    await layer.flush()
    await close_follower_connections()


@pytestmark_db
async def test_anonymous_sockets_are_refused(people, layer):
    comm = WebsocketCommunicator(AuthMiddlewareStack(URLRouter(websocket_urlpatterns)), "/ws/live/?view=instances")
    connected, code = await comm.connect()
    assert not connected and code == 4401


@pytestmark_db
async def test_a_stranger_cannot_subscribe_to_another_tenants_instance(people, layer):
    await sync_to_async(make_instance)("acme-live-1", tenant="acme")
    _, connected, code = await _connect(people["stranger"], "view=instance&instance=acme-live-1")
    assert not connected and code == 4403


@pytestmark_db
async def test_tenant_events_reach_only_members_of_that_tenant(people, layer):
    follower = HistoryFollower()
    await follower.poll_once()
    viewer, ok1, _ = await _connect(people["viewer"], "view=instances&newest=empty&after=0")
    stranger, ok2, _ = await _connect(people["stranger"], "view=instances&newest=empty&after=0")
    assert ok1 and ok2

    def create() -> None:
        inst = make_instance("acme-new-1", tenant="acme")
        add_history(inst, "instance.created", status="queued")

    await sync_to_async(create)()
    assert await follower.poll_once() == 1
    got = await _drain(viewer, PUSH_WAIT, until=1)
    assert len(got) == 1 and "1 new instance" in got[0] and 'id="new-rows"' in got[0]
    assert await stranger.receive_nothing(timeout=0.4)
    await viewer.disconnect()
    await stranger.disconnect()


@pytestmark_db
async def test_visible_rows_are_refreshed_in_place(people, layer):
    inst = await sync_to_async(make_instance)("acme-row-1", tenant="acme", status="running")
    follower = HistoryFollower()
    await follower.poll_once()
    comm, ok, _ = await _connect(people["viewer"], "view=instances&rows=acme-row-1&after=0")
    assert ok

    def finish() -> None:
        Instance.objects.filter(id=inst.id).update(status="complete", ended_at=timezone.now())
        add_history(inst, "instance.status", status="complete")

    await sync_to_async(finish)()
    assert await follower.poll_once() == 1
    cursor_msg, rows_msg = await _drain(comm, PUSH_WAIT, until=2)
    assert CURSOR.search(cursor_msg)
    # rows come alone and first in their message, so the browser parses them as table rows
    assert rows_msg.lstrip().startswith('<tr id="row-acme-row-1" hx-swap-oob="true"')
    assert "status-complete" in rows_msg
    assert 'id="new-rows"' not in cursor_msg + rows_msg  # a status change is not a new row
    await comm.disconnect()


@pytestmark_db
async def test_a_reconnecting_page_gets_what_it_missed_and_nothing_else(people, layer):
    def seed() -> list[int]:
        inst = make_instance("acme-resume", tenant="acme", status="running")
        ids = [add_history(inst, "step.completed", step_name=f"s{n}").id for n in range(5)]
        Instance.objects.filter(id=inst.id).update(status="complete")
        return ids

    ids = await sync_to_async(seed)()
    # The page saw up to ids[1]: on reconnect it gets the current state and the newest cursor.
    comm, ok, _ = await _connect(people["viewer"], f"view=instance&instance=acme-resume&after={ids[1]}")
    assert ok
    (msg,) = await _drain(comm, PUSH_WAIT, until=1)
    assert CURSOR.search(msg).group(1) == str(ids[-1])
    assert 'id="instance-header" hx-swap-oob="true"' in msg and "status-complete" in msg
    assert 'id="instance-history" class="card" hx-swap-oob="true"' in msg
    assert await comm.receive_nothing(timeout=0.3)
    await comm.disconnect()
    # A page that saw everything gets nothing on reconnect.
    comm, ok, _ = await _connect(people["viewer"], f"view=instance&instance=acme-resume&after={ids[-1]}")
    assert ok and await comm.receive_nothing(timeout=0.4)
    await comm.disconnect()


@pytestmark_db
async def test_a_burst_of_1000_step_events_is_coalesced_into_a_few_pushes(people, layer):
    from dashboard.live.follower import batches_by_group

    inst = await sync_to_async(make_instance)("acme-burst", tenant="acme", status="running")
    comm, ok, _ = await _connect(people["operator"], "view=instance&instance=acme-burst&after=0")
    assert ok

    def burst() -> list[dict]:
        now = timezone.now()
        History.objects.bulk_create(
            [
                History(
                    instance=inst,
                    workflow=inst.workflow,
                    tenant="acme",
                    kind="step.completed",
                    step_name=f"persist-facts-{n}",
                    created_at=now,
                )
                for n in range(1000)
            ]
        )
        rows = (
            History.objects.filter(instance=inst)
            .order_by("id")
            .values_list("id", "instance_id", "tenant", "kind", "status")
        )
        return [dict(zip(("id", "instance_id", "tenant", "kind", "status"), r, strict=True)) for r in rows]

    changes = await sync_to_async(burst)()
    last_id = changes[-1]["id"]
    loop = asyncio.get_running_loop()
    start = loop.time()
    # 50 notifications of 20 events, as the follower sends when commits keep landing between its
    # reads. The in-memory layer holds at most 100 messages per channel and drops the rest: at
    # 100 notifications a consumer the loaded machine had not yet let run lost the last one.
    for k in range(0, 1000, 20):
        for group, items in batches_by_group(changes[k : k + 20]).items():
            await layer.group_send(group, {"type": "history.batch", "changes": items})
        await asyncio.sleep(0.005)
    pushes: list[str] = []
    while loop.time() - start < PUSH_WAIT and not (
        pushes and CURSOR.search(pushes[0]) and CURSOR.search(pushes[-1]).group(1) == str(last_id)
    ):
        pushes += await _drain(comm, 0.05)
    pushes += await _drain(comm, 0.5)  # and nothing trails behind
    elapsed = loop.time() - start
    # At most ~10 pushes a second, counted against the time the burst really took (a slow machine
    # widens the bound with it), and fewer pushes than notifications, let alone events.
    assert 1 <= len(pushes) <= int(elapsed / MIN_INTERVAL) + 2
    assert len(pushes) < 50
    assert CURSOR.search(pushes[-1]).group(1) == str(last_id)  # the latest state, not a backlog
    # Every row was in the ledger before the first push, which sent them (later ones add nothing).
    assert "persist-facts-999" in pushes[0]
    await comm.disconnect()


@pytestmark_db
async def test_the_follower_only_wakes_groups_that_have_changes(people, layer):
    follower = HistoryFollower()
    await follower.poll_once()
    comm, ok, _ = await _connect(people["operator"], "view=instances&newest=empty&after=0")
    assert ok

    def other_tenant() -> None:
        inst = make_instance("initech-1", tenant="initech")
        add_history(inst, "instance.created")

    await sync_to_async(other_tenant)()
    assert await follower.poll_once() == 1
    assert await comm.receive_nothing(timeout=0.4)
    await comm.disconnect()


@pytest.mark.postgres
@pytestmark_db
async def test_on_postgresql_a_commit_wakes_the_follower_through_listen_notify(
    people, layer, live_settings, monkeypatch, require_postgres
):
    # Only NOTIFY can wake it before the safety poll, which comes long after the push's wait.
    monkeypatch.setattr(follower_module, "SAFETY_POLL_SECONDS", 4 * PUSH_WAIT)
    inst = await sync_to_async(make_instance)("acme-pg-1", tenant="acme", status="running")
    follower = HistoryFollower()
    follower.ensure_started()
    try:
        loop = asyncio.get_running_loop()
        start = loop.time()
        while follower.state is None:  # LISTEN is in place before its first read
            assert loop.time() - start < PUSH_WAIT, "the follower did not start"
            await asyncio.sleep(0.02)
        comm, ok, _ = await _connect(people["viewer"], "view=instance&instance=acme-pg-1&after=0")
        assert ok

        def write() -> None:
            # The engine NOTIFYs after its commits (ingest.engine.writes.notify), no longer by trigger.
            from ingest.engine.writes import notify

            add_history(inst, "step.completed", step_name="fetch")
            notify.history()

        await sync_to_async(write)()
        # Within PUSH_WAIT: woken by NOTIFY, as the safety poll comes only after four of them.
        (msg,) = await _drain(comm, PUSH_WAIT, until=1)
        assert 'id="instance-history"' in msg and "fetch" in msg
        await comm.disconnect()
    finally:
        await follower.stop()


@pytestmark_db
async def test_a_page_that_is_slow_to_render_is_pushed_less_often(people, layer):
    import time

    from dashboard.consumers import RENDER_SHARE
    from dashboard.live import render

    def slow(user, sub, pending):
        time.sleep(0.2)
        return f"<div id='slow' hx-swap-oob='true'>{pending.cursor}</div>"

    render.register("slow-test", slow)
    try:
        comm, ok, _ = await _connect(people["operator"], "view=slow-test&after=0")
        assert ok
        loop = asyncio.get_running_loop()
        start = loop.time()
        pushes: list[str] = []
        for n in range(1, 31):  # a change every 0.1 s for 3 s
            await layer.group_send(
                "rl-t.acme",
                {
                    "type": "history.batch",
                    "changes": [
                        {"id": n, "instance_id": "acme-x", "tenant": "acme", "kind": "step.completed", "status": ""}
                    ],
                },
            )
            pushes += await _drain(comm, 0.1)
        pushes += await _drain(comm, 1.5)
        while loop.time() - start < 4.5 + PUSH_WAIT and not (pushes and "30" in pushes[-1]):
            pushes += await _drain(comm, 0.1)  # the throttle's last push, however slow the renders
        elapsed = loop.time() - start
        # RENDER_SHARE (3) x 0.2 s: a push at most every 0.6 s. Without it a push would follow each
        # 0.2 s render at once (~15 of them).
        assert RENDER_SHARE == 3.0
        assert 2 <= len(pushes) <= int(elapsed / 0.6) + 2
        assert "30" in pushes[-1]  # the latest state arrives all the same
        await comm.disconnect()
    finally:
        render.RENDERERS.pop("slow-test", None)


@pytestmark_db
async def test_a_change_that_arrives_during_a_push_is_pushed_when_no_other_change_follows(people, layer, monkeypatch):
    """The last change of a burst lands while the previous push is still being sent: it is pushed
    all the same, without waiting for a change that never comes."""
    from dashboard.consumers import LiveConsumer
    from dashboard.live import render

    sending, go = asyncio.Event(), asyncio.Event()
    send = LiveConsumer.send

    async def held_send(self, text_data=None, bytes_data=None, close=False):
        sending.set()
        await go.wait()
        await send(self, text_data=text_data, bytes_data=bytes_data, close=close)

    def change(n: int) -> dict:
        return {
            "type": "history.batch",
            "changes": [{"id": n, "instance_id": "acme-x", "tenant": "acme", "kind": "step.completed", "status": ""}],
        }

    monkeypatch.setattr(LiveConsumer, "send", held_send)
    render.register("held-test", lambda user, sub, pending: f"<p>{pending.cursor}</p>")
    try:
        comm, ok, _ = await _connect(people["operator"], "view=held-test&after=0")
        assert ok
        await layer.group_send("rl-t.acme", change(1))
        await asyncio.wait_for(sending.wait(), PUSH_WAIT)  # change 1's push is on its way out
        await layer.group_send("rl-t.acme", change(2))
        await asyncio.sleep(0.3)  # change 2 is noted while that push is still being sent
        go.set()
        pushes = await _drain(comm, PUSH_WAIT, until=2)
        assert [CURSOR.search(p).group(1) for p in pushes] == ["1", "2"]
        await comm.disconnect()
    finally:
        go.set()
        render.RENDERERS.pop("held-test", None)


@pytestmark_db
async def test_a_step_that_changes_sends_its_own_row_and_the_summary_not_every_step(people, layer):
    from datetime import timedelta

    from ingest.engine.models import Step

    def run() -> tuple[Instance, list[dict]]:
        inst = make_instance("acme-rows", tenant="acme", status="running")
        t = timezone.now() - timedelta(minutes=5)
        for k in range(1, 6):
            Step.objects.create(
                instance=inst, name=f"persist-facts-{k}", seq=1, position=k, status="running", attempts=1, started_at=t
            )
        h = add_history(inst, "step.started", step_name="persist-facts-1")
        return inst, [
            {
                "id": h.id,
                "instance_id": inst.id,
                "tenant": "acme",
                "kind": "step.started",
                "status": "",
                "step_name": "persist-facts-1",
            }
        ]

    inst, first = await sync_to_async(run)()
    comm, ok, _ = await _connect(people["operator"], "view=instance&instance=acme-rows")
    assert ok
    await layer.group_send("rl-i.acme-rows", {"type": "history.batch", "changes": first})
    whole = await _drain(comm, PUSH_WAIT, until=1)
    assert whole and 'id="instance-steps"' in whole[0]  # the first push: the page whole

    def complete_third() -> list[dict]:
        Step.objects.filter(instance=inst, name="persist-facts-3").update(status="complete", ended_at=timezone.now())
        h = add_history(inst, "step.completed", step_name="persist-facts-3")
        return [
            {
                "id": h.id,
                "instance_id": inst.id,
                "tenant": "acme",
                "kind": "step.completed",
                "status": "",
                "step_name": "persist-facts-3",
            }
        ]

    await asyncio.sleep(0.2)
    await layer.group_send(
        "rl-i.acme-rows", {"type": "history.batch", "changes": await sync_to_async(complete_third)()}
    )
    push = (await _drain(comm, PUSH_WAIT, until=1))[0]
    assert 'id="step-persist-facts-3-1" hx-swap-oob="true"' in push
    assert "step-persist-facts-2-1" not in push.replace('href="#step-persist-facts-2-1"', "")  # only in the graph
    assert 'id="instance-steps"' not in push and 'id="instance-dag"' in push
    assert 'hx-swap-oob="beforeend:#instance-history-list"' in push and push.count("<li") == 1

    def add_fourth_call() -> list[dict]:
        Step.objects.create(
            instance=inst,
            name="persist-facts-3",
            seq=2,
            position=6,
            status="running",
            attempts=1,
            started_at=timezone.now(),
        )
        h = add_history(inst, "step.started", step_name="persist-facts-3#2")
        return [
            {
                "id": h.id,
                "instance_id": inst.id,
                "tenant": "acme",
                "kind": "step.started",
                "status": "",
                "step_name": "persist-facts-3#2",
            }
        ]

    await asyncio.sleep(0.2)
    await layer.group_send(
        "rl-i.acme-rows", {"type": "history.batch", "changes": await sync_to_async(add_fourth_call)()}
    )
    push = (await _drain(comm, PUSH_WAIT, until=1))[0]
    # A step that started since: appended after the others, the rest of the list not sent again.
    assert 'hx-swap-oob="beforeend:#instance-steps-list"' in push and 'id="step-persist-facts-3-2"' in push
    assert 'id="instance-steps"' not in push and 'id="step-persist-facts-1-1"' not in push
    assert ">6 steps<" in push

    def retry_deletes_one() -> list[dict]:
        Step.objects.filter(instance=inst, name="persist-facts-2").delete()
        h = add_history(inst, "operator", data={"action": "retry"})
        return [
            {"id": h.id, "instance_id": inst.id, "tenant": "acme", "kind": "operator", "status": "", "step_name": ""}
        ]

    await asyncio.sleep(0.2)
    await layer.group_send(
        "rl-i.acme-rows", {"type": "history.batch", "changes": await sync_to_async(retry_deletes_one)()}
    )
    push = (await _drain(comm, PUSH_WAIT, until=1))[0]
    assert 'id="instance-steps"' in push and "step-persist-facts-2-1" not in push  # the page whole again
    await comm.disconnect()
