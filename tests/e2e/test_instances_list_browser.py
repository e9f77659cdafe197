"""The instances list and bulk actions in a real browser, at 1280 and 390 px: the Back button
keeps the filter form and the list in agreement; several statuses, a sort and a search attribute
filter together; a bulk action by query acts on the previewed set when the set changed."""

from __future__ import annotations

from typing import Any
from urllib.parse import parse_qs, urlparse

import pytest

from tests.e2e.conftest import Session, create, login, status
from tests.e2e.servers import Stack, wait_until

pytestmark = pytest.mark.e2e

WIDTHS = [(1280, 860), (390, 844)]


def _session(browser: Any, stack: Stack, width: int, height: int) -> Session:
    s = login(browser, stack, "operator")
    s.page.set_viewport_size({"width": width, "height": height})
    s.page.set_default_timeout(30_000)  # a busy shared machine answers slowly
    return s


def _tagged(stack: Stack, prefix: str, customers: list[str]) -> list[str]:
    ids = [
        create(stack, "e2e-tagged", id=f"{prefix}-{c}", params={"customer": c, "domain": f"{c}.example"})
        for c in customers
    ]
    for i in ids:
        wait_until(lambda i=i: status(stack, i) == "waiting", timeout=30, what=f"{i} waiting")
    return ids


def _rows(s: Session) -> list[str]:
    return [r.get_attribute("id")[4:] for r in s.page.locator("#instance-rows tr[id^=row-]").all()]


def _query(s: Session) -> dict[str, list[str]]:
    return parse_qs(urlparse(s.page.url).query)


def _form(s: Session) -> dict[str, Any]:
    p = s.page
    return {
        "id": p.input_value("#f-id"),
        "attr": p.input_value("#f-attr"),
        "sort": p.input_value("#f-sort"),
        "status": sorted(
            c.get_attribute("value") for c in p.locator("form.filters input[name=status]").all() if c.is_checked()
        ),
    }


@pytest.mark.parametrize(("width", "height"), WIDTHS)
def test_back_restores_a_form_that_shows_the_listed_filters(browser, stack: Stack, width: int, height: int):
    prefix = f"back{width}"
    _tagged(stack, prefix, ["alpha", "beta", "gamma"])
    s = _session(browser, stack, width, height)
    p = s.page
    s.goto(f"/instances/?id={prefix}")
    assert sorted(_rows(s)) == [f"{prefix}-alpha", f"{prefix}-beta", f"{prefix}-gamma"]
    # Several statuses at once, through the multi-select.
    p.click("details.multi summary")
    s.shot(f"instances-status-menu-{width}")
    p.check("input[name=status][value=waiting]")
    p.wait_for_url(lambda u: "status=waiting" in u)
    p.check("input[name=status][value=queued]")
    p.wait_for_url(lambda u: "status=queued" in u)
    p.click("details.multi summary")
    # Sort by a search attribute, descending, then filter by one.
    p.fill("#f-attr", "domain:beta.example")
    p.press("#f-attr", "Enter")
    p.wait_for_url(lambda u: "attr=domain" in u)
    p.wait_for_function("document.querySelectorAll('#instance-rows tr[id^=row-]').length === 1")
    assert _rows(s) == [f"{prefix}-beta"]
    s.shot(f"instances-filtered-{width}", full_page=True)

    # Back, step by step: each time the list and the form say what the URL says.
    def back_and_check() -> dict[str, list[str]]:
        p.go_back()
        p.wait_for_timeout(400)
        q = _query(s)
        form = _form(s)
        assert form["id"] == q.get("id", [""])[0]
        assert form["attr"] == " ".join(q.get("attr", []))
        assert form["status"] == sorted(q.get("status", []))
        assert p.locator("details.multi summary").inner_text().strip() == (
            ", ".join(q["status"]) if "status" in q else "any"
        )
        return q

    for _ in range(4):  # Enter in a search field may push the same URL twice
        if "attr" not in back_and_check():
            break
    assert "attr" not in _query(s) and sorted(_query(s)["status"]) == ["queued", "waiting"]
    assert sorted(_rows(s)) == [f"{prefix}-alpha", f"{prefix}-beta", f"{prefix}-gamma"]
    assert back_and_check().get("status") == ["waiting"]
    s.shot(f"instances-after-back-{width}", full_page=True)
    # Sorting by the attribute, Z→A, lists gamma, beta, alpha.
    s.goto(f"/instances/?id={prefix}&status=waiting&status=queued&sort=-attr.customer")
    assert _rows(s) == [f"{prefix}-gamma", f"{prefix}-beta", f"{prefix}-alpha"]
    assert "3" in p.inner_text("#result-count")
    s.page.context.close()


def test_typing_a_filter_then_leaving_the_field_pushes_one_history_entry(browser, stack: Stack):
    """Typing asks for the list after a pause and pushes its URL; leaving the field (change) or
    pressing Enter (submit) asks for the URL the page already shows: no request, no second entry."""
    prefix = "hist"
    _tagged(stack, prefix, ["alpha", "beta"])
    s = _session(browser, stack, 1280, 860)
    p = s.page
    s.goto(f"/instances/?id={prefix}")
    p.click("#f-attr")
    p.keyboard.type("domain:beta.example")
    p.wait_for_url(lambda u: "attr=domain" in u)
    p.wait_for_function("document.querySelectorAll('#instance-rows tr[id^=row-]').length === 1")
    entries, url = p.evaluate("history.length"), p.url
    asked: list[str] = []
    p.on("request", lambda r: asked.append(r.url) if "/instances/" in r.url else None)
    p.keyboard.press("Tab")  # leaving the field: change
    p.press("#f-attr", "Enter")  # submitting the same filters
    p.wait_for_timeout(1500)
    assert (p.evaluate("history.length"), p.url) == (entries, url)
    assert asked == []
    p.go_back()
    p.wait_for_url(lambda u: "attr=" not in u)
    assert sorted(_rows(s)) == [f"{prefix}-alpha", f"{prefix}-beta"]
    s.page.context.close()


@pytest.mark.parametrize(("width", "height"), WIDTHS)
def test_a_bulk_terminate_acts_on_the_previewed_set_when_the_set_changed(
    browser, stack: Stack, width: int, height: int
):
    prefix = f"bulk{width}"
    ids = _tagged(stack, prefix, ["one", "two", "three"])
    s = _session(browser, stack, width, height)
    p = s.page
    s.goto(f"/instances/?id={prefix}&status=waiting")
    p.select_option("#bulk-action", "terminate")
    p.click("form.bulk button[type=submit]")
    p.wait_for_url(lambda u: "/bulk-actions/" in u)
    assert p.inner_text("#bulk-count").strip() == "3"
    late = _tagged(stack, prefix, ["late"])[0]  # matches the filters now, after the preview
    p.reload()
    assert "1 more match now" in p.inner_text("#bulk-changed")
    s.shot(f"bulk-preview-changed-{width}", full_page=True)
    p.fill("textarea[name=reason]", "customer churned")
    p.fill("input[name=rate_per_second]", "50")
    p.click("#bulk-confirm")
    p.wait_for_selector("#bulk-progress")
    p.wait_for_function(
        "document.querySelector('#bulk-state') && document.querySelector('#bulk-state').textContent.trim() === 'done'",
        timeout=30_000,
    )
    assert "3 of 3" in p.inner_text("#bulk-figures")
    assert "only the previewed instances are acted on" in p.inner_text("body")
    s.shot(f"bulk-progress-{width}", full_page=True)
    assert [status(stack, i) for i in ids] == ["terminated"] * 3
    assert status(stack, late) == "waiting"
    s.page.context.close()
