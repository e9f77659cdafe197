"""Creating a schedule and a route in the console at 1280 and 390 px: a wrong submit names every
wrong field at once, on its field, with the typed values kept; corrected, it is created; axe-core
finds no serious or critical violation on either form."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from tests.e2e.conftest import Session, login
from tests.e2e.servers import Stack
from tests.e2e.test_consoles_browser import axe, fits

pytestmark = pytest.mark.e2e


@pytest.fixture(params=[1280, 390], ids=lambda w: f"{w}px")
def op(request: pytest.FixtureRequest, browser: Any, stack: Stack) -> Iterator[Session]:
    width = int(request.param)
    s = login(browser, stack, "operator", width=width, height=900 if width > 500 else 844, timeout=30_000)
    yield s
    s.page.context.close()


def errored_fields(s: Session) -> set[str]:
    return set(s.page.eval_on_selector_all(".field.has-error [name]", "els => els.map(e => e.name)"))


def test_a_schedule_and_a_route_are_created_after_every_wrong_field_is_named_at_once(op: Session, stack: Stack) -> None:
    page = op.page
    width = page.viewport_size["width"]
    op.goto("/schedules/")
    page.locator(".page-head").get_by_role("link", name="New schedule").click()
    page.fill("#id_name", f"form-{width}")
    page.select_option("#id_workflow", "e2e-live-steps")
    page.select_option("#id_tenant", "acme")
    page.fill("#id_cron", "61 * * *")
    page.fill("#id_timezone", "Mars/Olympus")
    page.fill("#id_params", "[1]")
    page.get_by_role("button", name="Create schedule").click()
    assert errored_fields(op) == {"cron", "timezone", "params"}
    assert page.input_value("#id_cron") == "61 * * *"
    fits(op)
    assert axe(op) == []
    op.shot(f"schedule-new-refused-{width}", full_page=True)
    page.fill("#id_cron", "0 3 * * *")
    page.fill("#id_timezone", "Europe/Paris")
    page.fill("#id_params", "{}")
    page.get_by_role("button", name="Create schedule").click()
    page.wait_for_url(f"{stack.base_url}/schedules/form-{width}/")
    assert "created" in page.locator(".messages").inner_text()

    op.goto("/routes/")
    page.locator(".page-head").get_by_role("link", name="New route").click()
    page.fill("#id_name", f"form route {width}")
    page.select_option("#id_tenant", "acme")
    page.select_option("#id_workflow", "e2e-live-steps")
    page.fill("#id_wait_seconds", "0")
    page.fill("#id_priority", "5000")
    page.get_by_role("button", name="Create route").click()
    assert errored_fields(op) == {"name", "wait_seconds", "priority"}
    fits(op)
    assert axe(op) == []
    op.shot(f"route-new-refused-{width}", full_page=True)
    page.fill("#id_name", f"form-route-{width}")
    page.fill("#id_wait_seconds", "30")
    page.fill("#id_priority", "0")
    page.get_by_role("button", name="Create route").click()
    page.wait_for_url(f"{stack.base_url}/routes/form-route-{width}/")
    assert axe(op) == []
    fits(op)
