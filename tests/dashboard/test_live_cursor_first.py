"""A live page reads its history cursor before its data: a change that commits while the page is
being read (a worker finishing the run, say) then lies after the cursor and is pushed when the
page connects. Read last, the cursor skipped it, and the page showed the state before the change
until the next one (a CI run saw a replayed instance stay "running" in the browser)."""

from __future__ import annotations

from collections.abc import Callable
from importlib import import_module

import pytest
from django.test import Client
from django.utils import timezone
from ledger_factories import make_instance

from dashboard import selectors
from dashboard.access import user_ensure
from ingest.engine.models import History, HistoryKind, Instance

pytestmark = pytest.mark.django_db
# The module, not the function of the same name that dashboard.selectors exports.
detail_module = import_module("dashboard.selectors.instance_detail")


def _complete_meanwhile(instance_id: str) -> tuple[list[int], Callable[[], None]]:
    """(the ids of the history rows `finish` wrote, `finish`): what a worker does while the page
    is read: the run ends, with its history row."""
    made: list[int] = []

    def finish() -> None:
        Instance.objects.filter(id=instance_id).update(status="complete", ended_at=timezone.now())
        row = History.objects.create(
            instance_id=instance_id,
            workflow="gong-ingest",
            tenant="acme",
            kind=HistoryKind.INSTANCE_STATUS,
            status="complete",
            created_at=timezone.now(),
        )
        made.append(row.id)

    return made, finish


def test_the_detail_page_cursor_comes_before_a_change_made_while_it_is_read(monkeypatch):
    user = user_ensure(username="op", password="pw", memberships=[("acme", "operator")])
    make_instance("live-1", status="running")
    made, finish = _complete_meanwhile("live-1")
    read = detail_module.instance_get

    def read_then_finish(**kwargs):
        instance = read(**kwargs)
        finish()
        return instance

    monkeypatch.setattr(detail_module, "instance_get", read_then_finish)
    detail = selectors.instance_detail(user=user, instance_id="live-1")
    assert detail is not None and detail.instance.status == "running"  # read before the change
    assert detail.cursor < made[0]  # so the change is pushed when the page connects


def test_the_list_page_cursor_comes_before_a_change_made_while_it_is_read(monkeypatch):
    user = user_ensure(username="op", password="pw", memberships=[("acme", "operator")])
    make_instance("live-2", status="running")
    made, finish = _complete_meanwhile("live-2")
    counted = selectors.instance_list_counted

    def count_then_finish(**kwargs):
        page = counted(**kwargs)
        finish()
        return page

    monkeypatch.setattr(selectors, "instance_list_counted", count_then_finish)
    client = Client()
    client.force_login(user)
    response = client.get("/instances/")
    assert response.status_code == 200
    after = int(response.context["live_query"].split("after=")[1].split("&")[0])
    assert after < made[0]
