"""The first API token made without a shell, in a real browser at 1280 and 390 px: the operator
opens API tokens from the user menu, creates a token, copies it with the page's button, and it
authenticates the REST API; a reload no longer shows it; revoked after the confirmation, the API
answers 401. axe-core finds no serious or critical violation on the page."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
import requests
from playwright.sync_api import expect

from tests.e2e.conftest import Session, login
from tests.e2e.servers import Stack
from tests.e2e.test_consoles_browser import axe, fits

pytestmark = pytest.mark.e2e


@pytest.fixture(params=[1280, 390], ids=lambda w: f"{w}px")
def width(request: pytest.FixtureRequest) -> int:
    return int(request.param)


@pytest.fixture
def op(browser: Any, stack: Stack, width: int) -> Iterator[Session]:
    s = login(browser, stack, "operator", width=width, height=900 if width > 500 else 844, timeout=30_000)
    s.page.context.grant_permissions(["clipboard-read", "clipboard-write"], origin=stack.base_url)
    yield s
    s.page.context.close()


def api_status(stack: Stack, token: str) -> int:
    return requests.get(
        f"{stack.base_url}/api/instances", headers={"Authorization": f"Bearer {token}"}, timeout=30
    ).status_code


def test_a_token_made_in_the_console_works_with_the_api_until_revoked(op: Session, stack: Stack, width: int) -> None:
    page = op.page
    op.goto("/instances/")
    page.get_by_role("link", name="API tokens").click()
    page.wait_for_url(f"{stack.base_url}/tokens/")
    fits(op)
    name = f"browser {width}"
    page.fill("#id_name", name)
    page.fill("#id_expires_days", "30")
    page.get_by_role("button", name="Create token").click()
    token = page.input_value("#new-token")
    assert token.startswith("rla_")
    page.get_by_role("button", name="Copy token").click()
    # The clipboard answers asynchronously: wait for the page to say so.
    expect(page.locator("#copy-status")).to_have_text("Copied to the clipboard.")
    assert page.evaluate("navigator.clipboard.readText()") == token
    fits(op)
    assert axe(op) == []
    op.shot(f"api-token-created-{width}", full_page=True)

    assert api_status(stack, token) == 200

    op.goto("/tokens/")
    assert token not in page.content() and page.locator("#new-token").count() == 0
    row = page.locator("#token-list tr", has_text=name)
    assert row.locator("td.mono").inner_text() == token[:10] + "…"
    row.get_by_role("link", name=f"Revoke token {name}").click()
    assert api_status(stack, token) == 200  # the confirmation alone revokes nothing
    fits(op)
    page.get_by_role("button", name="Revoke token").click()
    page.wait_for_url(f"{stack.base_url}/tokens/")
    assert "revoked" in page.locator(".messages").inner_text()
    assert page.locator("#token-list tr", has_text=name).get_attribute("data-state") == "revoked"
    assert api_status(stack, token) == 401
