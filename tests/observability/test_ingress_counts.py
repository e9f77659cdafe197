"""Ingress request counts (dashboard/observability/ingress.py): labels a caller cannot mint, and a
flush that neither breaks the request's transaction nor lets one refused row block the rest.

The second is the cause of the ingress fuzz test's stall after the full suite: the path
`/api/routes/or%00ders` became the label "or\\x00ders", PostgreSQL refused it at the next flush
(due every 5 s, so only in a long run), the refusal broke the test's transaction, and the count
was kept and refused again at every later flush.
"""

from __future__ import annotations

from typing import Any

import pytest
from django.db import connection
from django.test import Client

from dashboard.observability import ingress
from dashboard.observability.ingress import INVALID, counts, ingress_route
from dashboard.observability.models import IngressTally

pytestmark = [pytest.mark.db, pytest.mark.django_db]


@pytest.fixture(autouse=True)
def _fresh_counts() -> Any:
    counts.discard()
    yield
    counts.discard()


@pytest.mark.parametrize(
    ("path", "label"),
    [
        ("/api/routes/orders", "orders"),
        ("/api/routes/orders/extra", "orders"),
        ("/api/routes/or\x00ders", INVALID),
        ("/api/routes/ord ers", INVALID),
        ("/api/routes/" + "x" * 101, INVALID),
        ("/api/routes/" + "x" * 100, "x" * 100),
        ("/hooks/gong/s3cr3t-key", "hooks/gong"),
        ("/hooks/salesforce/key/cdc", "hooks/salesforce"),
        ("/hooks/go\x00ng/key", None),
        ("/hooks/jira/key", None),
        ("/hooks/", None),
        ("/api/instances/x", None),
        ("/api/routes/", None),
    ],
)
def test_a_label_is_a_route_name_or_invalid(path: str, label: str | None) -> None:
    assert ingress_route(path) == label


def test_a_refused_count_is_dropped_and_the_rest_are_stored() -> None:
    counts.add("orders", 202)
    counts.add("or\x00ders", 400)  # only a bug could add this label; the flush must survive it
    counts.add("zeta", 401)
    counts.flush()
    stored = dict(IngressTally.objects.values_list("route", "n"))
    assert stored["orders"] == 1 and stored["zeta"] == 1
    if connection.vendor == "postgresql":
        assert "or\x00ders" not in stored
    assert counts._counts == {}  # nothing kept to be refused again
    assert IngressTally.objects.count() == len(stored)  # the transaction is still usable


def test_garbage_route_names_never_break_the_request_that_flushes(client: Client, monkeypatch: Any) -> None:
    monkeypatch.setattr(ingress, "FLUSH_SECONDS", 0.0)  # every request flushes, as a long run does
    for path in ("/api/routes/or%00ders", "/api/routes/" + "y" * 300, "/api/routes/nope", "/api/routes/or%00ders"):
        response = client.post(path, data=b"{}", content_type="application/json")
        assert response.status_code in (400, 401, 404), (path, response.status_code)
    stored = {(route, status): n for route, status, n in IngressTally.objects.values_list("route", "status", "n")}
    assert stored == {(INVALID, 400): 2, (INVALID, 404): 1, ("nope", 404): 1}


def test_probes_of_unknown_hook_sources_are_404_json_with_no_label_and_no_row(client: Client, monkeypatch: Any) -> None:
    monkeypatch.setattr(ingress, "FLUSH_SECONDS", 0.0)  # every request flushes
    for i in range(25):
        response = client.post(f"/hooks/probe-{i}/key", data=b"{}", content_type="application/json")
        assert response.status_code == 404 and response["Content-Type"].startswith("application/json")
        assert response.json()["error"]
    assert client.post("/hooks/gong/no-such-key", data=b"{}", content_type="application/json").status_code == 404
    stored = {(route, status): n for route, status, n in IngressTally.objects.values_list("route", "status", "n")}
    assert stored == {("hooks/gong", 404): 1}


def test_a_stored_count_of_an_unknown_hook_source_is_scraped_as_unknown() -> None:
    from dashboard.observability.gauges import _ingress

    rows = [("hooks/gong", 202, 3), ("hooks/probe-1", 404, 1), ("hooks/probe-2", 404, 1), ("orders", 202, 2)]
    assert _ingress(rows, {"orders"}) == {("hooks/gong", "202"): 3, ("unknown", "404"): 2, ("orders", "202"): 2}
