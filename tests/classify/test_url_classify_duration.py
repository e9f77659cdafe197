"""url-classify's `duration_ms`: the run's wall time from its start to its result, measured in
its last step (so a replay reads the same figure), stored with the classification and shown on
the classifications page."""

from __future__ import annotations

import time
from typing import Any

import pytest
from django.test import Client

from dashboard.access import demo_users_ensure
from ingest.classify.models import UrlClassification
from ingest.engine import get
from ingest.engine.models import Step
from ingest.workflows.url_classify import url_classify_start
from tests.fakes.classify import FakeClassifyLLM

pytestmark = [pytest.mark.db, pytest.mark.django_db]


def test_the_result_carries_the_runs_wall_time_including_its_llm_backoffs(
        classify_env: str, drain: Any, fake_llm: FakeClassifyLLM) -> None:  # fmt: skip
    url = "http://www.calm-meadow.com/slow"
    fake_llm.low.add(url)  # three unsure rounds, 30 s apart on the engine's clock
    instance_id = url_classify_start(classify_env, url, skip_content=True, max_rounds=3)
    drain()
    status = get(instance_id).status()
    assert status["status"] == "complete", status["error"]
    duration = status["output"]["duration_ms"]
    assert isinstance(duration, int) and duration >= 60_000  # the two backoffs at least
    stored = Step.objects.get(instance_id=instance_id, name="store-classification").result
    assert stored["duration_ms"] == duration  # memoised with the step: every replay reads it
    assert UrlClassification.objects.get(tenant=classify_env, url=url).duration_ms == duration


def test_a_quick_run_measures_a_short_time_and_the_page_shows_it(
        classify_env: str, drain: Any) -> None:  # fmt: skip
    url = "https://www.youtube.com/watch?v=abc"
    started = time.monotonic()
    instance_id = url_classify_start(classify_env, url)
    drain()
    elapsed_ms = (time.monotonic() - started) * 1000
    out = get(instance_id).status()["output"]
    assert out["classification_source"] == "rules"
    # No sleep and no retry delay for the clock to jump: the run took no longer than the test
    # watched it take (a second for the clocks' granularity), however slow the machine.
    assert 0 <= out["duration_ms"] <= elapsed_ms + 1000
    demo_users_ensure()
    viewer = Client()
    assert viewer.login(username="viewer", password="viewer")  # reads acme
    html = viewer.get("/classifications/").content.decode()
    assert f'<td class="num duration">{out["duration_ms"]} ms</td>' in html
