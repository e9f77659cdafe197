"""A credential rotation in a real browser at 1280 and 390 px: the operator opens Rotate… on the
routes page, is asked why and for how long the old pair keeps working, and sees the new token and
secret once, with copy buttons that fill the clipboard; the old and the new pair both sign a
request to the running stack during the overlap; back on the list neither secret is shown, only
the prefixes and when the old pair stops. axe-core finds no serious or critical violation."""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import Iterator
from typing import Any

import pytest
import requests
from playwright.sync_api import expect

from ingest.triggers import signing
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


@pytest.fixture
def credential(stack: Stack, width: int) -> dict[str, str]:
    """A route of acme and a credential of its own for this width, made on the stack's database."""
    name = f"rotate-{width}"
    out = stack.python(
        "from ingest.triggers import services as s; "
        f"s.route_upsert(name={name!r}, workflow='e2e-live-steps', tenant='acme'); "
        f"row, token, secret = s.ingress_secret_create(tenant='acme', name={name!r}); print(token, secret)"
    )
    token, secret = out.strip().splitlines()[-1].split()
    return {"name": name, "token": token, "secret": secret}


def ingress(stack: Stack, route: str, token: str, secret: str) -> int:
    body = json.dumps({"request": uuid.uuid4().hex}).encode()
    stamp = str(int(time.time()))
    headers = {
        "Authorization": f"Bearer {token}",
        "Content-Type": "application/json",
        "X-Runledger-Timestamp": stamp,
        "X-Runledger-Signature": signing.sign(secret=secret, timestamp=stamp, body=body),
    }
    return requests.post(f"{stack.base_url}/api/routes/{route}", data=body, headers=headers, timeout=30).status_code


def test_rotation_asks_why_then_shows_the_new_pair_once_while_the_old_one_still_works(
    op: Session, stack: Stack, credential: dict[str, str], width: int
) -> None:
    page, name = op.page, credential["name"]
    op.goto("/routes/")
    page.locator(f'tr[data-credential="acme/{name}"]').get_by_role("link", name="Rotate").click()
    page.wait_for_url(f"**/credentials/acme/{name}/rotate/")
    fits(op)
    assert page.input_value("#id_overlap_seconds") == "3600"  # one hour unless chosen otherwise
    page.get_by_role("button", name="Rotate credential").click()  # without a reason: refused in place
    assert "Nothing was rotated" in page.locator(".msg-error").inner_text()
    assert (
        page.locator("#new-token").count() == 0
        and ingress(stack, name, credential["token"], credential["secret"]) == 202
    )
    page.fill("#id_reason", f"browser test at {width} px")
    page.select_option("#id_overlap_seconds", "900")
    assert axe(op) == []
    page.get_by_role("button", name="Rotate credential").click()

    token, secret = page.input_value("#new-token"), page.input_value("#new-secret")
    assert token.startswith("rli_") and secret.startswith("rls_") and token != credential["token"]
    assert "keep working until" in page.locator(".page-head").inner_text()
    page.get_by_role("button", name="Copy secret").click()
    expect(page.locator("#copy-secret-status")).to_have_text("Copied to the clipboard.")
    assert page.evaluate("navigator.clipboard.readText()") == secret
    page.get_by_role("button", name="Copy token").click()
    expect(page.locator("#copy-token-status")).to_have_text("Copied to the clipboard.")
    assert page.evaluate("navigator.clipboard.readText()") == token
    fits(op)
    card = page.locator("#credential-shown").bounding_box()
    for field in ("#new-token", "#new-secret"):
        box = page.locator(field).bounding_box()
        assert box["x"] + box["width"] <= card["x"] + card["width"], f"{field} overflows its card"
    assert axe(op) == []
    op.shot(f"credential-rotated-{width}", full_page=True)

    assert ingress(stack, name, token, secret) == 202  # the new pair
    assert ingress(stack, name, credential["token"], credential["secret"]) == 202  # the old, in its overlap

    page.get_by_role("link", name="I have stored them").click()
    page.wait_for_url(f"{stack.base_url}/routes/")
    html = page.content()
    assert token not in html and secret not in html and credential["secret"] not in html
    row = page.locator(f'tr[data-credential="acme/{name}"]')
    assert token[:10] in row.inner_text() and f"old {credential['token'][:10]}… works until" in row.inner_text()
