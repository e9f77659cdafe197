"""Gong's rate limit shared by real worker processes on PostgreSQL: two workers fetching
transcripts for one access key together stay under the connection's limit, as the fake Gong
measures it (it records when each request arrived).

Before the shared bucket each process kept its own limiter, so two workers sent twice the limit.
"""

from __future__ import annotations

from collections.abc import Sequence

import pytest

from ingest.demo.corpus import demo_calls
from tests.conftest import PG_URL
from tests.engine.procs import Database, python, start_workers, stop, wait_for
from tests.fakes import FakeGong

pytestmark = [pytest.mark.postgres, pytest.mark.e2e]
CALLS = 12  # two Gong requests each (speakers, transcript): 24 requests
PER_SECOND, BURST = 2, 1
WINDOW = 3.0  # seconds: the bucket lets through at most BURST + PER_SECOND × WINDOW = 7 in any


def most_in_a_window(arrivals: Sequence[float], window: float) -> int:
    """The most requests that arrived within `window` seconds of one another."""
    times = sorted(arrivals)
    return max(sum(1 for t in times[i:] if t < start + window) for i, start in enumerate(times))


SETUP = """
from ingest.pipelines.services import connection_upsert, keyword_list_set
from ingest.workflows.gong import gong_ingest_start
connection_upsert(tenant="acme", kind="gong", base_url={url!r}, key="gong-key", secret="gong-secret",
                  options={{"rate_limit": {{"per_second": {rate}, "burst": {burst}}}}})
keyword_list_set(tenant="acme", keywords=["no call says this"])  # engagement only: no LLM call
for call_id in {ids!r}:
    gong_ingest_start("acme", {{"id": call_id, "title": "Acme Logistics <> Us"}})
"""


@pytest.mark.pure
def test_counting_requests_in_a_window() -> None:
    assert most_in_a_window([0.0, 0.5, 0.9, 1.0, 2.5], 1.0) == 3
    assert most_in_a_window([0.0], 1.0) == 1


def test_two_worker_processes_share_one_gong_limit(tmp_path) -> None:
    with FakeGong(demo_calls(count=CALLS)) as fake, Database(PG_URL) as db:
        python(db, SETUP.format(url=fake.url, rate=PER_SECOND, burst=BURST, ids=[c.id for c in fake.calls]))
        workers = start_workers(
            db, 2, log_dir=tmp_path, concurrency=4, lease=10.0, poll=0.05, env={"RUNLEDGER_EMBEDDINGS": "off"}
        )
        try:
            wait_for(
                lambda: (
                    db.execute(
                        "SELECT count(*) FROM engine_instance WHERE workflow = 'gong-ingest' AND status = 'complete'"
                    )
                    == [(CALLS,)]
                ),
                timeout=180,
                interval=0.5,
                what=f"{CALLS} gong-ingest instances to complete",
            )
        finally:
            codes = [stop(w) for w in workers]
        assert codes == [0, 0]
        # Both processes fetched: each alone would have let its own limit's worth through.
        assert db.execute(
            "SELECT count(DISTINCT a.worker) FROM engine_attempt a JOIN engine_step s "
            "ON s.id = a.step_id WHERE s.name = 'fetch-transcript'"
        ) == [(2,)]
    arrivals = [r.at for r in fake.requests]
    assert len(arrivals) == 2 * CALLS
    # A generous margin for the network's jitter: two processes each at the limit send about 13.
    assert most_in_a_window(arrivals, WINDOW) <= BURST + PER_SECOND * WINDOW + 2
