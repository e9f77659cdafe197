"""A DataForSEO connection added in the console at 1280 and 390 px: a wrong submit names every
wrong field at once with no secret echoed back, the corrected one is saved with its secrets shown
only as set with their masked end, and "Test connection" makes one free call to a local fake
DataForSEO and shows its answer; the pages fit their width and axe-core finds no serious or
critical violation."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from tests.e2e.conftest import Session, login
from tests.e2e.servers import Stack
from tests.e2e.test_consoles_browser import axe, fits
from tests.fakes.dataforseo import ROUTE_USER_DATA, FakeDataForSEO

pytestmark = pytest.mark.e2e
PASSWORD = "dfs-password-e2e-7781"


@pytest.fixture(params=[1280, 390], ids=lambda w: f"{w}px")
def op(request: pytest.FixtureRequest, browser: Any, stack: Stack) -> Iterator[Session]:
    width = int(request.param)
    s = login(browser, stack, "operator", width=width, height=900 if width > 500 else 844, timeout=30_000)
    yield s
    s.page.context.close()


def errored_fields(s: Session) -> set[str]:
    return set(s.page.eval_on_selector_all(".field.has-error [name]", "els => els.map(e => e.name)"))


def test_a_connection_is_added_and_tested_against_a_fake(op: Session, stack: Stack) -> None:
    page = op.page
    width = page.viewport_size["width"]
    tenant = "acme" if width > 500 else "globex"  # the stack is shared by both widths
    with FakeDataForSEO(login="dfs-login", password=PASSWORD) as dfs:
        op.goto("/connections/")
        fits(op)
        page.locator(".page-head").get_by_role("link", name="New connection").click()
        page.get_by_role("link", name="DataForSEO").click()
        page.select_option("#id_tenant", tenant)
        page.fill("#id_base_url", "not a url")
        page.fill("#id_key", "dfs-login")
        page.fill("#id_options", "[1]")
        page.get_by_role("button", name="Save connection").click()
        assert errored_fields(op) == {"base_url", "secret", "options"}
        assert page.input_value("#id_key") == ""  # a secret is never sent back to the browser
        fits(op)
        assert axe(op) == []
        op.shot(f"connection-new-refused-{width}", full_page=True)
        page.fill("#id_base_url", dfs.url)
        page.fill("#id_key", "dfs-login")
        page.fill("#id_secret", PASSWORD)
        page.fill("#id_options", "")
        page.get_by_role("button", name="Save connection").click()
        page.wait_for_url(f"{stack.base_url}/connections/{tenant}/dataforseo/")
        assert PASSWORD not in page.content() and "set, ends ••••7781" in page.locator("body").inner_text()
        page.get_by_role("button", name="Test connection").click()
        page.wait_for_url(f"{stack.base_url}/connections/{tenant}/dataforseo/")
        said = page.locator(".messages").inner_text()
        assert "Test connection: ok." in said and "balance 42.5 USD" in said, said
        assert dfs.count(ROUTE_USER_DATA) == 1 and dfs.billed == 0
        assert "ok" in page.locator("#last-test").inner_text()
        fits(op)
        assert axe(op) == []
        op.shot(f"connection-tested-{width}", full_page=True)
        op.goto("/connections/")
        row = page.locator(f'tr[data-connection="{tenant}/dataforseo"]')
        assert "ok" in row.inner_text() and PASSWORD not in page.content()
        fits(op)
        assert axe(op) == []
        op.shot(f"connections-{width}", full_page=True)
