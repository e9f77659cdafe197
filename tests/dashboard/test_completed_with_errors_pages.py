"""completed_with_errors on the operator pages: its own tile, filter and column, a warning, not a failure."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.utils import timezone
from ledger_factories import make_instance

from dashboard.charts import throughput_figure
from dashboard.selectors.overview import throughput_rows
from dashboard.selectors.workflows import workflow_summaries

pytestmark = pytest.mark.db


def _finished(status: str, n: int, *, tenant: str = "acme") -> None:
    at = timezone.now() - timedelta(minutes=5)
    for _ in range(n):
        make_instance(tenant=tenant, workflow="domain-onboard", status=status, created_at=at, ended_at=at)


def test_the_overview_has_a_tile_for_instances_completed_with_errors_linking_to_the_filtered_list(operator):
    _finished("completed_with_errors", 2)
    _finished("errored", 1)
    r = operator.get("/")
    assert r.context["counts"]["completed_with_errors"] == 2 and r.context["counts"]["errored"] == 1
    html = r.content.decode()
    assert (
        'class="tile tile-completed_with_errors" href="/instances/?status=completed_with_errors&amp;range=24h"' in html
    )
    listed = operator.get("/instances/", {"status": "completed_with_errors"})
    assert listed.status_code == 200
    assert listed.content.decode().count("status-completed_with_errors") >= 2


def test_throughput_counts_completed_with_errors_apart_and_not_as_failures(db):
    _finished("complete", 2)
    _finished("completed_with_errors", 1)
    _finished("errored", 1)
    [row] = throughput_rows(tenants=["acme"], since=timezone.now() - timedelta(hours=2))
    assert (row["complete"], row["with_errors"], row["errored"]) == (2, 1, 1)
    figure = throughput_figure([row])
    bars = {d["name"]: d["y"] for d in figure["data"]}
    assert bars["with errors"] == [1]
    assert bars["failure rate %"] == [25.0]  # 1 errored of 4 finished


def test_the_workflows_page_shows_a_with_errors_column_and_a_failure_rate_without_them(operator):
    _finished("complete", 1)
    _finished("completed_with_errors", 2)
    _finished("errored", 1)
    [summary] = workflow_summaries(tenants=["acme"], since=timezone.now() - timedelta(days=1))
    assert (summary["complete"], summary["with_errors"], summary["errored"]) == (1, 2, 1)
    html = operator.get("/workflows/").content.decode()
    assert "With errors" in html and "25%" in html


def test_the_hour_in_progress_is_drawn_whole_and_the_failure_axis_reads_whole_percents() -> None:
    """The current hour's bar starts at the hour and spans it: the axis runs to the hour's end,
    not to now, where the bar hid under the right-hand axis; that axis ticks 0, 25 … 100 %."""
    from datetime import UTC, datetime

    until = datetime(2026, 11, 29, 0, 16, tzinfo=UTC)
    since = until - timedelta(hours=24)
    row = {"bucket": datetime(2026, 11, 29, 0, 0, tzinfo=UTC), "complete": 3, "with_errors": 0, "errored": 0}
    layout = throughput_figure([row], since=since, until=until)["layout"]
    assert layout["xaxis"]["range"] == [since, datetime(2026, 11, 29, 1, 0, tzinfo=UTC)]
    assert layout["yaxis2"]["tickvals"] == [0, 25, 50, 75, 100] and layout["yaxis2"]["range"] == [0, 100]
    on_the_hour = datetime(2026, 11, 29, 1, 0, tzinfo=UTC)
    assert throughput_figure([row], since=since, until=on_the_hour)["layout"]["xaxis"]["range"][1] == on_the_hour
