"""Issue 19's consoles in a real browser at 1280 and 390 px: schedules (Quartz cron, an edit
refused in place, run now), routes and subscriptions (coalesce windows; a rotation: its own test),
workers (the stack's own worker, live), keyboard navigation with a visible focus, and axe-core
finding no serious or critical violation on any of these pages."""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any

import pytest

from tests.e2e.conftest import Session, login
from tests.e2e.servers import Stack, wait_until

pytestmark = pytest.mark.e2e

WIDTHS = [1280, 390]
SERIOUS = ("serious", "critical")


@pytest.fixture(scope="module")
def triggers(stack: Stack) -> dict[str, str]:
    """A schedule with seed 001's expression, a debounced route with two open windows, a
    subscription, all in acme; one initech schedule the operator must not see."""
    out = stack.python(
        "from django.utils import timezone as tz; from ingest.triggers import services as s; "
        "from ingest.triggers.models import Route; "
        "s.schedule_create(name='month-end', workflow='e2e-live-steps', cron_expression='59 23 LW * *', "
        "tenant='acme', now=tz.now()); "
        "s.schedule_create(name='initech-nightly', workflow='e2e-live-steps', cron_expression='0 3 * * *', "
        "tenant='initech', now=tz.now()); "
        "s.route_upsert(name='crm-sync', workflow='e2e-live-steps', tenant='acme', "
        "coalesce={'debounce': {'key': 'account', 'period': '1 hour'}}); "
        "s.subscription_create(workflow='e2e-live-steps', pattern='user.*', tenant='acme'); "
        "row, token, secret = s.ingress_secret_create(tenant='acme', name='e2e'); "
        "[s.coalesce_add(source='route:crm-sync', config=__import__('ingest.triggers.coalesce', "
        "fromlist=['parse']).parse(Route.objects.get(name='crm-sync').coalesce), workflow='e2e-live-steps', "
        "tenant='acme', payload={'account': a}, now=tz.now(), actor='e2e') for a in ('a1', 'a1', 'b2')]; "
        "print(token)"
    )
    return {"token": out.strip().splitlines()[-1]}


@pytest.fixture(params=WIDTHS, ids=lambda w: f"{w}px")
def width(request: pytest.FixtureRequest) -> int:
    return int(request.param)


@pytest.fixture
def op(browser: Any, stack: Stack, width: int) -> Iterator[Session]:
    s = login(browser, stack, "operator", width=width, height=900 if width > 500 else 844, timeout=30_000)
    yield s
    s.page.context.close()


def axe(s: Session, *, within: str = "html") -> list[dict[str, Any]]:
    """axe-core's serious and critical violations on the page as it is now (in `within`)."""
    s.page.add_script_tag(url=f"{s.base}/static/vendor/axe.min.js")
    found = s.page.evaluate(
        """async (within) => (await axe.run(within, {resultTypes: ['violations']}))
        .violations.map(v => ({id: v.id, impact: v.impact, help: v.help,
                               nodes: v.nodes.slice(0, 3).map(n => n.target.join(' ') + ': ' + n.failureSummary)}))""",
        within,
    )
    return [v for v in found if v["impact"] in SERIOUS]


def fits(s: Session) -> None:
    assert s.page.evaluate("document.documentElement.scrollWidth") <= s.page.viewport_size["width"], s.page.url


def test_schedules_show_quartz_fires_refuse_a_bad_edit_in_place_and_run_now(
    op: Session, stack: Stack, triggers: dict[str, str], width: int
) -> None:
    page = op.page
    op.goto("/schedules/")
    row = page.locator('tr[data-schedule="month-end"]')
    assert row.locator("time").count() == 5 and page.locator('tr[data-schedule="initech-nightly"]').count() == 0
    fits(op)
    assert axe(op) == []
    op.shot(f"consoles-schedules-{width}", full_page=True)
    row.get_by_role("link", name="Edit").click()
    page.fill("#id_cron", "61 * * * *")
    page.get_by_role("button", name="Save schedule").click()
    error = page.locator(".field.has-error", has=page.locator("#id_cron"))
    assert "is invalid" in error.inner_text() and page.input_value("#id_cron") == "61 * * * *"
    assert axe(op) == []
    op.shot(f"consoles-schedule-refused-{width}", full_page=True)
    stored = stack.python(
        "from ingest.triggers.models import Schedule; print(Schedule.objects.get(name='month-end').cron)"
    )
    assert stored.strip() == "59 23 LW * *"
    page.get_by_role("button", name="Run now").first.click()
    assert "fired now" in page.locator(".messages").inner_text()


def test_routes_list_their_open_windows(op: Session, stack: Stack, triggers: dict[str, str], width: int) -> None:
    page = op.page
    op.goto("/routes/")
    assert page.locator('tr[data-route="crm-sync"] td.num').first.inner_text() == "2"
    fits(op)
    assert axe(op) == []
    op.shot(f"consoles-routes-{width}", full_page=True)
    op.goto("/routes/crm-sync/")
    assert page.locator("text=a1").count() >= 1 and "route-crm-sync-debounce-" in page.content()
    assert axe(op) == []
    op.shot(f"consoles-route-detail-{width}", full_page=True)


def test_workers_page_shows_the_live_worker_with_its_slots(op: Session, stack: Stack, width: int) -> None:
    page = op.page
    wait_until(
        lambda: "live" in (op.goto("/workers/") and page.locator("#workers").inner_text()),
        timeout=20,
        what="the stack's worker to show live",
    )
    row = page.locator("tr[data-worker]").first
    assert (
        f"/ {stack.concurrency}" in row.inner_text() and int(row.locator("[data-age]").get_attribute("data-age")) <= 10
    )
    fits(op)
    assert axe(op) == []
    op.shot(f"consoles-workers-{width}", full_page=True)


def test_lists_take_j_k_enter_and_slash_with_a_visible_focus(op: Session, triggers: dict[str, str], width: int) -> None:
    page = op.page
    op.goto("/routes/")
    page.keyboard.press("j")
    focused = page.evaluate("document.activeElement.getAttribute('data-route')")
    assert focused == "crm-sync"
    outline = page.evaluate("getComputedStyle(document.activeElement).outlineWidth")
    assert outline not in ("", "0px"), outline
    op.shot(f"consoles-keyboard-{width}")
    page.keyboard.press("k")
    assert page.evaluate("document.activeElement.getAttribute('data-route')") == "crm-sync"
    page.keyboard.press("Enter")
    page.wait_for_url("**/routes/crm-sync/")
    op.goto("/instances/")
    page.keyboard.press("/")
    assert page.evaluate("document.activeElement.tagName") == "INPUT"


def test_a_viewer_reads_without_actions_and_a_stranger_sees_nothing(
    browser: Any, stack: Stack, triggers: dict[str, str]
) -> None:
    viewer = login(browser, stack, "viewer", width=1280)
    try:
        viewer.goto("/schedules/")
        assert viewer.page.locator('tr[data-schedule="month-end"]').count() == 1
        assert viewer.page.get_by_role("button", name="Run now").count() == 0
        viewer.goto("/routes/")
        assert viewer.page.get_by_role("link", name=re.compile("^Rotate the token")).count() == 0
        assert viewer.page.get_by_role("link", name="New credential").count() == 0
        assert axe(viewer) == []
    finally:
        viewer.page.context.close()
    stranger = login(browser, stack, "stranger", width=390, height=844)
    try:
        assert stranger.goto("/schedules/month-end/").status == 404
        stranger.goto("/routes/")
        assert "crm-sync" not in stranger.page.content()
        stranger.shot("consoles-routes-stranger-390")
    finally:
        stranger.page.context.close()
