"""The instances list's fan-out items, attribute query and saved views, and the costs page's
tables, in a real browser at 1280 and 390 px: a run that fanned out is listed alone with its item
counts, whose link lists the items; the "Top-level only" toggle lists them all; OR, range and
negation filter from the form; a bad term is named inside the layout; a view is saved, opened,
renamed and deleted; the costs page shows the per-day table and the per-run percentiles. No page
scrolls sideways."""

from __future__ import annotations

from typing import Any

import pytest

from tests.e2e.conftest import Session, create, login, status
from tests.e2e.servers import Stack, wait_until
from tests.e2e.test_consoles_browser import axe

pytestmark = pytest.mark.e2e

WIDTHS = [(1280, 860), (390, 844)]
ITEMS = [
    {"customer": "acme", "amount": 10},
    {"customer": "globex", "amount": 60},
    {"customer": "acme", "amount": 75},
    {"customer": "initech", "amount": 5},
]


def _session(browser: Any, stack: Stack, width: int, height: int) -> Session:
    s = login(browser, stack, "operator")
    s.page.set_viewport_size({"width": width, "height": height})
    s.page.set_default_timeout(30_000)  # a busy shared machine answers slowly
    return s


def _rows(s: Session) -> list[str]:
    return [r.get_attribute("id")[4:] for r in s.page.locator("#instance-rows tr[id^=row-]").all()]


def _fits(s: Session) -> None:
    assert s.page.evaluate("document.documentElement.scrollWidth") <= s.page.viewport_size["width"], s.page.url


def _landed(stack: Stack, parent: str) -> int:
    return int(
        stack.python(
            "from ingest.engine.models import Instance; "
            f"print(Instance.objects.filter(parent_id={parent!r}, status='complete').count())"
        ).strip()
    )


def _wait_rows(s: Session, n: int) -> None:
    s.page.wait_for_function(f"document.querySelectorAll('#instance-rows tr[id^=row-]').length === {n}")


@pytest.mark.parametrize(("width", "height"), WIDTHS)
def test_items_under_their_run_the_attribute_query_and_saved_views(browser, stack: Stack, width: int, height: int):
    batch = f"b{width}"
    parent = create(stack, "e2e-fan-items", id=f"fan-{batch}", params={"batch": batch, "items": ITEMS})
    wait_until(lambda: _landed(stack, parent) == len(ITEMS), timeout=60, what="the items landed")
    s = _session(browser, stack, width, height)
    p = s.page
    s.goto(f"/instances/?attr=batch:{batch}")
    assert _rows(s) == [parent]  # top-level only, by default
    counts = p.locator(f'[data-items-of="{parent}"]')
    assert "4 items" in counts.inner_text() and "4 done" in counts.inner_text()
    _fits(s)
    assert axe(s) == []  # the items link's accessible name holds its visible text
    s.shot(f"instances-top-level-{width}", full_page=True)
    counts.get_by_text("4 items").click()
    p.wait_for_url(lambda u: f"parent={parent}" in u)
    assert len(_rows(s)) == 4 and p.locator("#parent-banner").is_visible()
    s.shot(f"instances-items-of-run-{width}", full_page=True)
    # The toggle, from the form: the run and its items.
    s.goto(f"/instances/?attr=batch:{batch}")
    p.select_option("#f-top", "0")
    p.wait_for_url(lambda u: "top=0" in u)
    _wait_rows(s, 5)
    # OR, range and negation typed in the attribute field (the toggle stays off).
    for query, n in (
        (f"batch:{batch} customer:globex|initech", 2),
        (f"batch:{batch} amount:50..80", 2),
        (f"batch:{batch} amount>=50 !customer:acme", 2),
        (f"batch:{batch} !customer:acme", 2),
    ):
        p.fill("#f-attr", query)
        p.press("#f-attr", "Enter")
        _wait_rows(s, n)
    assert "top=0" in p.url
    s.shot(f"instances-attr-query-{width}", full_page=True)
    # A bad term: a 400 inside the layout that names it.
    response = s.goto(f"/instances/?attr=batch:{batch}%20amount%3E%3Dlots")
    assert response.status == 400
    assert "'lots' is not a number" in p.locator(".flash-error").inner_text()
    assert p.locator("nav.mainnav").is_visible() and _rows(s) == []
    _fits(s)
    # Save the view, open it from the menu, rename it and delete it.
    s.goto(f"/instances/?attr=batch:{batch}%20amount%3E%3D50&top=0")
    _wait_rows(s, 3)
    p.fill("#save-view-name", f"big {batch}")
    p.click("form.save-view button[type=submit]")
    p.wait_for_url(lambda u: "/instances/?" in u and "amount" in u)
    assert f"Saved view 'big {batch}'" in p.content()
    s.goto("/instances/")
    p.click("#saved-menu summary")
    s.shot(f"instances-saved-menu-{width}")
    p.locator("#saved-menu").get_by_role("link", name=f"big {batch}").click()
    p.wait_for_url(lambda u: "amount" in u)
    _wait_rows(s, 3)
    s.goto("/saved-views/")
    row = p.locator("#saved-views tr", has_text=f"big {batch}")
    row.locator("summary").click()
    row.locator("input[name=name]").fill(f"large {batch}")
    row.get_by_role("button", name="Rename").click()
    p.wait_for_url(lambda u: u.endswith("/saved-views/"))
    assert p.locator("#saved-views", has_text=f"large {batch}").is_visible()
    _fits(s)
    s.shot(f"saved-views-{width}", full_page=True)
    p.locator("#saved-views tr", has_text=f"large {batch}").get_by_role("button", name="Delete").click()
    p.wait_for_url(lambda u: u.endswith("/saved-views/"))
    assert f"large {batch}" not in p.locator("#saved-views").inner_text()
    p.context.close()


@pytest.mark.parametrize(("width", "height"), WIDTHS)
def test_the_costs_page_shows_spend_per_day_and_per_run(browser, stack: Stack, width: int, height: int):
    # Three paid runs of $0.50 each (tenant default: no other test's budget stands in their way).
    ids = [create(stack, "e2e-budgeted", id=f"paid-{width}-{k}", tenant="default") for k in range(3)]
    for i in ids:
        wait_until(lambda i=i: status(stack, i) == "complete", timeout=60, what=f"{i} complete")
    s = _session(browser, stack, width, height)
    p = s.page
    s.goto("/costs/?window=24h&workflow=e2e-budgeted&tenant=default")
    p.wait_for_selector("#run-percentiles")  # asked for by the page once it is shown
    days, runs = p.locator("#cost-by-day"), p.locator("#run-percentiles")
    assert days.is_visible() and runs.is_visible()
    head = [h.inner_text().strip() for h in runs.locator("thead th").all()]
    assert head == ["Workflow", "Runs", "p50", "p90", "p99"]
    cells = [c.inner_text().strip() for c in runs.locator("tbody tr").first.locator("td").all()]
    assert cells[0] == "e2e-budgeted" and int(cells[1]) >= 3 and cells[2:] == ["$0.5000"] * 3
    row = days.locator("tbody tr", has_text="llm-extract").first
    assert "e2e-budgeted" in row.inner_text() and days.locator("tr.day-head").count() >= 1
    _fits(s)
    p.locator("#cost-by-day").scroll_into_view_if_needed()
    s.shot(f"costs-tables-{width}")
    p.context.close()
