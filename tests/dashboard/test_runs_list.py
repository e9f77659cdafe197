"""The instances ledger: keyset pagination, filters in the URL, htmx partials."""

from __future__ import annotations

import re
from datetime import timedelta

import pytest
from django.utils import timezone
from ledger_factories import T0, make_instance

from dashboard.selectors import PAGE_SIZE, Cursor

pytestmark = pytest.mark.db

ROW = re.compile(r'<tr id="row-([^"]+)"')


def _ids(response) -> list[str]:
    return ROW.findall(response.content.decode())


def _link(response, rel: str) -> str | None:
    m = re.search(rf'rel="{rel}" href="([^"]+)"', response.content.decode())
    return m.group(1).replace("&amp;", "&") if m else None


@pytest.fixture
def many(users):
    # 130 rows; runs of 7 share a created_at so the id breaks ties (the keyset's second column).
    rows = [
        make_instance(
            f"run-{n:04d}",
            tenant="acme",
            created_at=T0 + timedelta(seconds=n // 7),
            status="complete" if n % 3 else "errored",
            workflow="gong-ingest" if n % 2 else "sf-sync",
            params={"domain": f"site{n}.example", "n": n},
        )
        for n in range(130)
    ]
    return sorted(rows, key=lambda r: (r.created_at, r.id), reverse=True)


def test_walking_older_pages_visits_every_row_once_in_order(operator, many):
    seen: list[str] = []
    url = "/instances/"
    pages = 0
    while url:
        r = operator.get(url)
        ids = _ids(r)
        assert len(ids) <= PAGE_SIZE
        seen += ids
        pages += 1
        nxt = _link(r, "next")
        url = f"/instances/{nxt}" if nxt else ""
    assert pages == 3
    assert seen == [r.id for r in many]


def test_newer_links_walk_back_to_the_same_pages(operator, many):
    first = operator.get("/instances/")
    second = operator.get("/instances/" + _link(first, "next"))
    third = operator.get("/instances/" + _link(second, "next"))
    back = operator.get("/instances/" + _link(third, "prev"))
    assert _ids(back) == _ids(second)
    back2 = operator.get("/instances/" + _link(back, "prev"))
    assert _ids(back2) == _ids(first)
    assert _link(back2, "prev") is None


def test_the_page_query_uses_a_keyset_not_an_offset(operator, many, django_assert_max_num_queries):
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    cursor = Cursor(many[60].created_at, many[60].id).encode()
    with CaptureQueriesContext(connection) as ctx:
        r = operator.get(f"/instances/?after={cursor}")
    assert _ids(r) == [x.id for x in many[61:111]]
    listing = [q["sql"] for q in ctx.captured_queries if "engine_instance" in q["sql"] and "ORDER BY" in q["sql"]]
    assert listing and all("OFFSET" not in q.upper() for q in listing)


def test_a_garbled_cursor_is_a_400_that_names_it_not_the_first_page(operator, many):
    response = operator.get("/instances/?after=not-a-cursor")
    assert response.status_code == 400 and _ids(response) == []
    assert "after=&#x27;not-a-cursor&#x27; is not a page cursor" in response.content.decode()


@pytest.mark.parametrize(
    "query,check",
    [
        ("status=errored", lambda r: r.status == "errored"),
        ("workflow=sf-sync", lambda r: r.workflow == "sf-sync"),
        ("id=run-001", lambda r: r.id.startswith("run-001")),
        ("q=site42.example", lambda r: r.params["domain"] == "site42.example"),
        ("workflow=sf-sync&status=complete", lambda r: r.workflow == "sf-sync" and r.status == "complete"),
    ],
)
def test_filters_select_exactly_the_matching_rows(operator, many, query, check):
    expected = [r.id for r in many if check(r)][:PAGE_SIZE]
    assert expected
    assert _ids(operator.get(f"/instances/?{query}")) == expected


def test_time_filters_and_ranges(operator, many):
    since = (T0 + timedelta(seconds=10)).strftime("%Y-%m-%dT%H:%M:%S")
    until = (T0 + timedelta(seconds=12)).strftime("%Y-%m-%dT%H:%M:%S")
    ids = _ids(operator.get(f"/instances/?since={since}&until={until}"))
    assert ids == [r.id for r in many if T0 + timedelta(seconds=10) <= r.created_at < T0 + timedelta(seconds=12)]
    make_instance("fresh-1", tenant="acme", created_at=timezone.now() - timedelta(minutes=5))
    assert _ids(operator.get("/instances/?range=1h")) == ["fresh-1"]


def test_filters_are_kept_in_the_pagination_links(operator, many):
    r = operator.get("/instances/?workflow=gong-ingest")
    nxt = _link(r, "next")
    assert nxt and "workflow=gong-ingest" in nxt
    assert all(x.startswith("run-") for x in _ids(operator.get("/instances/" + nxt)))
    assert set(_ids(operator.get("/instances/" + nxt))) <= {r.id for r in many if r.workflow == "gong-ingest"}


def test_htmx_requests_get_only_the_results_fragment(operator, many):
    r = operator.get("/instances/?status=errored", HTTP_HX_REQUEST="true")
    html = r.content.decode()
    assert r.status_code == 200
    assert html.lstrip().startswith('<div id="results">') and "<html" not in html
    assert _ids(r) == [x.id for x in many if x.status == "errored"][:PAGE_SIZE]
    # the socket is re-pointed at the new filters
    assert 'id="rl-live" hx-swap-oob="true"' in html and "status=errored" in html


def test_every_hx_get_link_keeps_a_real_href(operator, many):
    html = operator.get("/instances/").content.decode()
    for tag in re.findall(r"<a [^>]*hx-get[^>]*>", html):
        assert 'href="' in tag


def test_the_live_socket_url_carries_the_resume_point_and_the_newest_row(operator, many):
    html = operator.get("/instances/").content.decode()
    m = re.search(r'ws-connect="/ws/live/\?([^"]+)"', html)
    assert m
    q = m.group(1).replace("&amp;", "&")
    assert "view=instances" in q and "after=" in q and f"newest={Cursor.of(many[0]).encode()}" in q
