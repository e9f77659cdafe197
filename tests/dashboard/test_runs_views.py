"""The runs pages from the three sides: operator, viewer, stranger (another tenant)."""

from __future__ import annotations

import pytest

from ledger_factories import add_history, make_instance, make_run

pytestmark = pytest.mark.db


def test_anonymous_users_are_sent_to_the_login_page(client, db):
    response = client.get("/instances/")
    assert response.status_code == 302
    assert response["Location"].startswith("/login/?next=/instances/")


def test_the_login_page_logs_a_demo_user_in(client, users):
    response = client.post("/login/", {"username": "viewer", "password": "viewer"})
    assert response.status_code == 302
    assert client.get("/instances/").status_code == 200


def test_the_detail_page_shows_the_run(operator):
    inst = make_instance(status="complete")
    make_run(inst)
    add_history(inst, "operator", actor="operator", reason="customer asked", data={"action": "pause"})
    r = operator.get(f"/instances/{inst.id}/")
    assert r.status_code == 200
    html = r.content.decode()
    assert "fetch-calls" in html and "llm-extract-1" in html
    assert "retry delay 10.0s" in html
    assert "sk-SECRET-VALUE" not in html and "Redacted" in html
    assert "customer asked" in html
    assert "$0.0375" in html  # 0.0125 + 0.025
