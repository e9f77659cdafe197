"""The concurrency limits page in a real browser at 1280 and 390 px: an operator sets a tenant's
limit with the form, sees it beside what runs now, changes it in its row, and axe-core finds no
serious or critical violation."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from tests.e2e.conftest import Session, login
from tests.e2e.servers import Stack
from tests.e2e.test_consoles_browser import axe, fits

pytestmark = pytest.mark.e2e

WIDTHS = [1280, 390]


@pytest.fixture(params=WIDTHS, ids=lambda w: f"{w}px")
def op(request: pytest.FixtureRequest, browser: Any, stack: Stack) -> Iterator[Session]:
    width = int(request.param)
    stack.python(
        "from ingest.engine.models import ConcurrencyLimit; ConcurrencyLimit.objects.filter(key='acme').delete()"
    )
    s = login(browser, stack, "operator", width=width, height=900 if width > 500 else 844, timeout=30_000)
    yield s
    s.page.context.close()


def test_an_operator_sets_and_changes_a_tenants_limit_on_the_page(op: Session) -> None:
    page = op.page
    width = page.viewport_size["width"]
    op.goto("/limits/")
    form = page.locator("#set-limit form")
    form.get_by_label("Workflow").select_option("gong-ingest")
    form.get_by_label("Tenant").select_option("acme")
    form.get_by_label("Max concurrent").fill("6")
    form.get_by_role("button", name="Save limit").click()
    page.wait_for_url("**/limits/")
    row = page.locator('tr[data-limit="gong-ingest/acme"]')
    assert row.get_attribute("data-cap") == "6" and "a limit" in row.inner_text()
    assert "runs at most 6 gong-ingest at once" in page.locator("#messages").inner_text()
    fits(op)
    assert axe(op) == []
    op.shot(f"limits-{width}", full_page=True)
    row.get_by_label("Max concurrent for acme on gong-ingest").fill("2")
    row.get_by_role("button", name="Set").click()
    page.wait_for_url("**/limits/")
    assert page.locator('tr[data-limit="gong-ingest/acme"]').get_attribute("data-cap") == "2"
