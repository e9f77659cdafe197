"""The operations pages over the live socket: overview counters, dead-letter groups and the
approvals inbox are pushed (no polling), scoped to the user's tenants, throttled per page."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from types import SimpleNamespace

import pytest
from asgiref.sync import sync_to_async
from channels.layers import get_channel_layer
from channels.routing import URLRouter
from channels.testing import WebsocketCommunicator
from ledger_factories import add_history, make_instance
from test_ops_factories import approval, failed_instance

from dashboard.live import follower as follower_module
from dashboard.live.follower import HistoryFollower, close_follower_connections
from dashboard.live.render import MIN_INTERVALS, RENDERERS
from dashboard.routing import websocket_urlpatterns

db = pytest.mark.django_db(transaction=True)
PUSH_WAIT = 30.0  # a push that is coming arrives long before this on any machine


@pytest.fixture
def people(transactional_db, settings):
    from django.contrib.auth import get_user_model

    from dashboard.access import demo_users_ensure

    settings.RUNLEDGER_LIVE_FOLLOWER = False  # the tests drive the follower by hand
    demo_users_ensure()
    return {u.username: u for u in get_user_model().objects.all()}


@pytest.fixture
async def layer():
    layer = get_channel_layer()
    await layer.flush()
    yield layer
    await layer.flush()
    await close_follower_connections()


async def _connect(user, query: str):
    comm = WebsocketCommunicator(URLRouter(websocket_urlpatterns), f"/ws/live/?{query}")
    comm.scope["user"] = user
    connected, _ = await comm.connect()
    assert connected
    return comm


async def _drain(comm, seconds: float, *, until: Callable[[str], bool] | None = None) -> list[str]:
    """Messages pushed within `seconds`, or until the pushes so far, joined, satisfy `until`:
    a wait for a push is generous (it ends as soon as the push came), a wait for the absence of
    one is short (a busy machine can only make it pass more easily)."""
    out: list[str] = []
    loop = asyncio.get_running_loop()
    end = loop.time() + seconds
    while loop.time() < end and not (until is not None and until("".join(out))):
        if comm.output_queue.empty():
            await asyncio.sleep(0.01)
            continue
        out.append((await comm.receive_output())["text"])
    return out


@pytest.mark.pure
def test_the_ops_pages_register_their_live_renderers_with_a_slower_throttle():
    assert {"overview", "dead_letters", "approvals", "workflow_dag"} <= set(RENDERERS)
    assert all(MIN_INTERVALS[v] >= 0.5 for v in ("overview", "dead_letters", "approvals"))


@pytest.mark.django_db
def test_the_ops_pages_no_longer_poll_and_open_the_socket_for_their_view(operator):
    for url, view in (("/", "overview"), ("/dead-letters/", "dead_letters"), ("/approvals/", "approvals")):
        html = operator.get(url).content.decode()
        assert "every 15s" not in html and 'hx-trigger="every' not in html
        assert f'ws-connect="/ws/live/?view={view}' in html


@db
async def test_the_overview_counters_follow_new_dead_letters_without_a_reload(people, layer):
    follower = HistoryFollower()
    await follower.poll_once()
    comm = await _connect(people["operator"], "view=overview&after=0")

    def fail() -> None:
        dl = failed_instance(tenant="acme")
        add_history(dl.instance, "instance.status", status="errored")

    await sync_to_async(fail)()
    await follower.poll_once()
    pushes = await _drain(
        comm, PUSH_WAIT, until=lambda html: "dead letters waiting" in html and 'id="overview-tables"' in html
    )
    html = "".join(pushes)
    assert 'id="overview-counters" class="stack" hx-swap-oob="true"' in html
    assert "dead letters waiting" in html and 'id="overview-tables"' in html
    await comm.disconnect()


@db
async def test_the_approvals_inbox_is_pushed_to_members_only(people, layer):
    follower = HistoryFollower()
    await follower.poll_once()
    viewer = await _connect(people["viewer"], "view=approvals&after=0")
    stranger = await _connect(people["stranger"], "view=approvals&after=0")

    def ask() -> None:
        req = approval(tenant="acme", title="Publish the Q3 facts?")
        add_history(req.instance, "approval", status="waiting")

    await sync_to_async(ask)()
    await follower.poll_once()
    seen = "".join(
        await _drain(viewer, PUSH_WAIT, until=lambda html: 'id="inbox"' in html and "Publish the Q3 facts?" in html)
    )
    assert 'id="inbox"' in seen and "Publish the Q3 facts?" in seen
    assert "Publish the Q3 facts?" not in "".join(await _drain(stranger, 0.3))
    await viewer.disconnect()
    await stranger.disconnect()


@db
async def test_a_dead_letter_page_gets_its_groups_not_the_selection_under_the_reader(people, layer):
    follower = HistoryFollower()
    await follower.poll_once()
    comm = await _connect(people["operator"], "view=dead_letters&after=0&state=open")

    def fail() -> None:
        dl = failed_instance(tenant="globex", step="persist-facts-3")
        add_history(dl.instance, "instance.status", status="errored")

    await sync_to_async(fail)()
    await follower.poll_once()
    html = "".join(
        await _drain(comm, PUSH_WAIT, until=lambda html: 'id="dl-groups"' in html and "persist-facts-{i}" in html)
    )
    assert 'id="dl-groups"' in html and "persist-facts-{i}" in html
    assert 'name="ids"' not in html  # the checkbox list is left alone
    await comm.disconnect()


@db
async def test_a_groups_items_follow_its_count_when_a_redriven_letter_fails_again(people, layer):
    # A group's count and its list must not disagree: a redrive empties the list, the retried
    # instance fails again, and the letter is back in both (its checkbox kept by id).
    dl = await sync_to_async(failed_instance)(tenant="acme", step="persist-facts-3")
    follower = HistoryFollower()
    await follower.poll_once()
    comm = await _connect(people["operator"], f"view=dead_letters&after=0&state=open&signature={dl.signature}")

    def fail_again() -> None:
        again = failed_instance(tenant="acme", step="persist-facts-3")
        add_history(again.instance, "instance.status", status="errored")

    await sync_to_async(fail_again)()
    await follower.poll_once()
    html = "".join(await _drain(comm, PUSH_WAIT, until=lambda html: 'id="dl-items"' in html))
    assert 'id="dl-groups"' in html and 'id="dl-items" hx-swap-oob="true"' in html
    assert "2 instances in this group" in html and html.count('hx-preserve="true"') == 2
    await comm.disconnect()


@db
async def test_a_burst_on_the_overview_is_one_push_a_second(people, layer):
    follower = HistoryFollower()
    await follower.poll_once()
    comm = await _connect(people["operator"], "view=overview&after=0")
    inst = await sync_to_async(make_instance)("acme-ov-burst", tenant="acme", status="running")
    start = time.monotonic()
    for n in range(30):
        await sync_to_async(add_history)(inst, "step.completed", step_name=f"persist-facts-{n}")
        await follower.poll_once()
    pushes = await _drain(comm, PUSH_WAIT, until=bool)  # the first push, however busy the machine
    pushes += await _drain(comm, MIN_INTERVALS["overview"] + 0.5)  # and any the throttle held back
    elapsed = time.monotonic() - start
    # Counted against the time the burst really took, so a slow machine widens the bound with it.
    assert 1 <= len(pushes) <= int(elapsed / MIN_INTERVALS["overview"]) + 2
    await comm.disconnect()


class _Clock:
    """The follower's clock and sleep, moved by hand: a read's wait is what the follower asked
    for, not what a busy machine gave it."""

    def __init__(self) -> None:
        self.now = 1000.0
        self.slept: list[float] = []

    def monotonic(self) -> float:
        return self.now

    async def sleep(self, seconds: float) -> None:
        self.slept.append(seconds)
        self.now += seconds


@db
async def test_the_follower_coalesces_commits_into_reads_at_most_every_50_ms(people, layer, monkeypatch):
    clock = _Clock()
    monkeypatch.setattr(follower_module, "time", clock)
    monkeypatch.setattr(follower_module, "asyncio", SimpleNamespace(sleep=clock.sleep))
    gap = follower_module.MIN_READ_GAP_SECONDS
    follower = HistoryFollower()
    await follower.poll_once()
    assert clock.slept == []  # the first read at once
    for _ in range(5):  # reads asked for back to back (commits keep coming): each waits out the gap
        await follower.poll_once()
    assert clock.slept == pytest.approx([gap] * 5)
    clock.now += gap / 2
    await follower.poll_once()  # half the gap has passed: it waits the other half
    assert clock.slept[-1] == pytest.approx(gap / 2)
    clock.now += 10 * gap
    await follower.poll_once()  # a read after a quiet spell goes at once
    assert len(clock.slept) == 6
