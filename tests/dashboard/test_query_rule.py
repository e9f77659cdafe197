"""One rule for bad query parameters on every console page: a 400 inside the layout (the base
template's navigation is there) that names each bad parameter and its value, never a silently
ignored or replaced filter; under /api/ the same as JSON."""

from __future__ import annotations

import html
import re

import pytest
from django.test import Client

from dashboard.query_params import BadQuery, QueryReader

pytestmark = pytest.mark.db

ALERT = re.compile(r'<div class="flash flash-error" role="alert">(.*?)</div>', re.S)
ITEM = re.compile(r"<li>(.*?)</li>", re.S)

# (page, query string, the parameter named, what of its value the message quotes)
BAD = [
    ("/", "window=zzz", "window", "zzz"),
    ("/instances/", "status=zzz", "status", "zzz"),
    ("/instances/", "since=notadate", "since", "notadate"),
    ("/instances/", "since=1800-01-01", "since", "1800-01-01"),
    ("/instances/", "until=2026-13-45", "until", "2026-13-45"),
    ("/instances/", "id=%00", "id", "NUL"),
    ("/instances/", "page=-5", "page", "-5"),
    ("/instances/", "sort=-created&page=9999999", "page", "9999999"),
    ("/instances/", "before=zzz", "before", "zzz"),
    ("/workflows/", "window=zzz", "window", "zzz"),
    ("/workflows/demo-order/", "metric=zzz", "metric", "zzz"),
    ("/workflows/demo-order/", "window=2y", "window", "2y"),
    ("/dead-letters/", "state=zzz", "state", "zzz"),
    ("/dead-letters/", "sort=zzz", "sort", "zzz"),
    ("/dead-letters/", "q=" + "x" * 300, "q", "300 characters"),
    ("/dead-letters/redrive/", "state=zzz", "state", "zzz"),
    ("/costs/", "from=notadate", "from", "notadate"),
    ("/costs/", "to=2026-13-45", "to", "2026-13-45"),
    ("/costs/", "window=zzz", "window", "zzz"),
    ("/costs/", "by=zzz", "by", "zzz"),
    ("/costs/", "sort=zzz", "sort", "zzz"),
    ("/costs/export.csv", "from=notadate", "from", "notadate"),
    ("/classifications/", "page=-5", "page", "-5"),
    ("/classifications/", "source=zzz", "source", "zzz"),
    ("/domains/", "status=zzz", "status", "zzz"),
    ("/breakers/", "state=zzz", "state", "zzz"),
    ("/alerts/notifications/", "state=zzz", "state", "zzz"),
    ("/audit/", "source=zzz", "source", "zzz"),
    ("/audit/", "before=-1", "before", "-1"),
]


def _problems(response) -> list[str]:
    alert = ALERT.search(response.content.decode())
    assert alert, "the page says nothing about what was wrong"
    return [html.unescape(item) for item in ITEM.findall(alert.group(1))]


@pytest.mark.parametrize(("path", "query", "name", "value"), BAD, ids=[f"{p}?{q[:30]}" for p, q, _, _ in BAD])
def test_a_bad_query_parameter_is_a_400_in_the_layout_that_names_it(operator: Client, path, query, name, value):
    response = operator.get(f"{path}?{query}")
    assert response.status_code == 400
    assert response["Content-Type"].startswith("text/html")
    assert b'<nav class="mainnav" aria-label="Main">' in response.content
    assert any(re.search(rf"\b{re.escape(name)}\b", p) and value in p for p in _problems(response)), _problems(response)


def test_every_bad_parameter_of_a_page_is_named_at_once(operator: Client):
    response = operator.get("/costs/?from=notadate&to=2026-13-45&window=zzz&by=service")
    problems = _problems(response)
    assert response.status_code == 400 and len(problems) == 3
    assert [p.split("=")[0] for p in problems] == ["window", "from", "to"]


@pytest.mark.parametrize(
    ("path", "query"),
    [
        ("/", "window=7d"),
        ("/instances/", "since=2026-01-01&until=2026-02-01T10:00"),
        ("/instances/", "sort=-created&page=2"),
        ("/dead-letters/", "state="),
        ("/dead-letters/", "state=discarded"),
        ("/costs/", "from=2026-01-01&to=2026-01-31&by=workflow&sort=-calls"),
        ("/costs/", "window="),
        ("/classifications/", "page=2&source="),
        ("/audit/", "before=12"),
        ("/breakers/", "state=open"),
    ],
)
def test_good_and_empty_values_still_answer_200(operator: Client, path, query):
    assert operator.get(f"{path}?{query}").status_code == 200


def test_an_empty_dead_letter_state_means_any_and_no_state_means_open(operator: Client):
    assert operator.get("/dead-letters/?state=").context["f"].state == ""
    assert operator.get("/dead-letters/").context["f"].state == "open"


def test_the_reader_keeps_every_problem_and_raises_them_together():
    reader = QueryReader({"a": "x", "n": "0", "t": "2026-02-30", "s": " ok "})
    assert reader.choice("a", ("y", "z"), "y") == "y"
    assert reader.integer("n", default=1, low=1, high=10) == 1
    assert reader.when("t") is None
    assert reader.text("s", max_chars=5) == "ok"
    with pytest.raises(BadQuery) as raised:
        reader.done()
    assert [p.split("=")[0] for p in raised.value.problems] == ["a", "n", "t"]
