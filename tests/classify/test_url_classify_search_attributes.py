"""url-classify tags its instance (version 2) with the URL's host and the ids its params carry, and
the instances list finds it; a run started on version 1 replays its recorded steps without the
new one."""

from __future__ import annotations

from typing import Any

import pytest

from ingest.engine import get
from ingest.engine.models import InstanceAttributes
from ingest.workflows.url_classify import UrlClassify, url_classify_start
from tests.fakes.classify import FakeClassifyLLM
from tests.personas import listed, operator_client

pytestmark = [pytest.mark.db, pytest.mark.django_db]

VIDEO = "https://www.YouTube.com/watch?v=dQw4w9WgXcQ&email=ann@example.com"  # the rules decide it


def attributes(instance_id: str) -> dict[str, str] | None:
    row = InstanceAttributes.objects.filter(instance_id=instance_id).first()
    return None if row is None else row.attributes


def step_names(instance_id: str) -> list[str]:
    return [s["name"] for s in get(instance_id).status()["steps"]]


def test_a_url_is_tagged_with_its_host_and_ids_never_its_query_and_the_operator_finds_it(
    classify_env: str, drain: Any
) -> None:
    child = url_classify_start(classify_env, VIDEO, domain_id=7, url_id=42)
    bare = url_classify_start(classify_env, "https://github.com/django/django")
    drain()
    assert get(child).status()["status"] == "complete"
    assert step_names(child)[:2] == ["search-attributes", "cache-check"]
    assert attributes(child) == {"host": "youtube.com", "domain_id": "7", "url_id": "42"}
    assert attributes(bare) == {"host": "github.com"}

    operator = operator_client()
    assert listed(operator, "attr=host:youtube.com") == [child]
    assert listed(operator, "attr=domain_id:7") == [child]  # as its domain-onboard parent is tagged
    assert listed(operator, "workflow=url-classify&sort=attr.host") == [bare, child]


def test_ids_that_are_not_whole_numbers_are_left_out(classify_env: str, drain: Any) -> None:
    run = url_classify_start(classify_env, VIDEO, domain_id="7; drop", url_id=True)
    drain()
    assert attributes(run) == {"host": "youtube.com"}


def test_a_run_started_on_version_1_replays_its_recorded_steps_without_the_new_one(
    classify_env: str, drain: Any, fake_llm: FakeClassifyLLM, monkeypatch: pytest.MonkeyPatch
) -> None:
    url = "http://www.calm-meadow.com/x"
    fake_llm.low.add(url)  # unsure answers: a 30 s backoff between two rounds
    monkeypatch.setattr(UrlClassify, "version", 1)
    run = url_classify_start(classify_env, url, skip_content=True, max_rounds=2)
    monkeypatch.setattr(UrlClassify, "version", 2)  # the deploy, while the run is in flight
    drain(advance_clock=False)
    assert get(run).status()["status"] == "waiting"
    assert step_names(run)[:2] == ["cache-check", "rules"] and "llm-backoff-1" in step_names(run)

    drain()  # the backoff ends: replayed from the top over the recorded steps
    status = get(run).status()
    assert status["status"] == "complete", status["error"]
    assert status["output"]["round"] == 2
    assert "search-attributes" not in step_names(run)
    assert attributes(run) is None
