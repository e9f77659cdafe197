"""Small console behaviours: answers vary on HX-Request (Back never shows a cached fragment),
the admin names its lists in English."""

from __future__ import annotations

import pytest
from django.test import Client

from dashboard.access import demo_users_ensure

pytestmark = pytest.mark.db


@pytest.mark.parametrize("path", ["/instances/", "/instances/?status=errored", "/dead-letters/", "/costs/", "/audit/"])
def test_a_page_that_serves_htmx_fragments_varies_on_hx_request(operator: Client, path: str) -> None:
    page = operator.get(path)
    fragment = operator.get(path, headers={"HX-Request": "true"})
    assert page.status_code == fragment.status_code == 200
    assert len(fragment.content) < len(page.content)  # the fragment is a part of the page
    for response in (page, fragment):
        vary = {v.strip().lower() for v in response.get("Vary", "").split(",")}
        assert "hx-request" in vary, response.get("Vary")


def test_the_admin_says_audit_entries_and_history_entries(db: None) -> None:
    demo_users_ensure()
    admin = Client()
    assert admin.login(username="admin", password="admin")
    index = admin.get("/admin/").content.decode()
    assert "Audit entries" in index and "History entries" in index
    assert "entrys" not in index and "Historys" not in index


def test_the_api_docs_load_swagger_ui_from_this_server_not_a_cdn(operator: Client) -> None:
    page = operator.get("/api/docs")
    assert page.status_code == 200
    html = page.content.decode()
    assert "https://" not in html and "http://" not in html  # nothing fetched from elsewhere
    assets = [a for a in ("swagger-ui-bundle.js", "swagger-ui-init.js", "swagger-ui.css") if a in html]
    assert len(assets) == 3
    for asset in assets:
        served = operator.get(f"/static/ninja/{asset}")
        assert served.status_code == 200
        assert len(b"".join(served.streaming_content) if served.streaming else served.content) > 1000
