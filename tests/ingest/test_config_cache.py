"""Keyword lists and connections are read once per CONFIG_CACHE_SECONDS per process; an edit
saved in this process applies at once, one made elsewhere once the cache is older than that."""

from __future__ import annotations

import threading

import pytest

from ingest.engine import get
from ingest.pipelines import selectors
from ingest.pipelines.models import Connection, KeywordList
from ingest.pipelines.selectors import keyword_list_get, llm_config_get
from ingest.pipelines.services import connection_upsert, keyword_list_set
from ingest.workflows import gong_ingest_start
from tests.fakes import FakeOpenAI
from tests.fakes.llm import CHAT

pytestmark = [pytest.mark.db, pytest.mark.django_db]
TEXT = "Dana Whitfield: Our budget is $50k for the pricing tier.\nMaya Chen: Noted."


@pytest.fixture
def clock(monkeypatch: pytest.MonkeyPatch) -> list[float]:
    now = [1000.0]
    monkeypatch.setattr(selectors.time, "monotonic", lambda: now[0])
    return now


def test_a_cached_keyword_list_and_llm_connection_are_not_read_again(django_assert_num_queries) -> None:
    keyword_list_set(tenant="acme", keywords=["budget"])
    connection_upsert(tenant="acme", kind="llm", options={"provider": "rules"})
    assert keyword_list_get(tenant="acme") == ["budget"]
    assert llm_config_get(tenant="acme").provider == "rules"
    with django_assert_num_queries(0):
        assert keyword_list_get(tenant="acme") == ["budget"]
        assert llm_config_get(tenant="acme").provider == "rules"
        assert keyword_list_get(tenant="acme") is not keyword_list_get(tenant="acme")  # callers get copies


def test_a_saved_keyword_list_applies_at_once_in_this_process(
    openai_tenant: str, fake_openai: FakeOpenAI, drain
) -> None:
    assert keyword_list_get(tenant="acme") == ["budget", "price", "pricing", "proposal"]
    keyword_list_set(tenant="acme", keywords=["blockchain"])
    started = gong_ingest_start("acme", {"id": "1"}, transcript=TEXT)
    drain()
    assert get(started.instance_id).status()["output"]["engagement_only"] is True
    assert fake_openai.count(CHAT) == 0
    KeywordList.objects.get(tenant="acme").delete()
    assert keyword_list_get(tenant="acme") is None


def test_an_edit_made_elsewhere_is_read_once_the_cache_is_older_than_its_limit(clock: list[float]) -> None:
    keyword_list_set(tenant="acme", keywords=["budget"])
    connection_upsert(tenant="acme", kind="llm", options={"provider": "rules"})
    assert keyword_list_get(tenant="acme") == ["budget"]
    assert llm_config_get(tenant="acme").provider == "rules"
    # Another process's edits: no signal reaches this one (QuerySet.update() sends none either).
    KeywordList.objects.filter(tenant="acme").update(keywords=["pricing"])
    Connection.objects.filter(tenant="acme", kind="llm").update(options={"provider": "openai", "model": "m"})
    clock[0] += selectors.CONFIG_CACHE_SECONDS
    assert keyword_list_get(tenant="acme") == ["budget"]
    assert llm_config_get(tenant="acme").provider == "rules"
    clock[0] += 0.001
    assert keyword_list_get(tenant="acme") == ["pricing"]
    assert (llm_config_get(tenant="acme").provider, llm_config_get(tenant="acme").model) == ("openai", "m")


def test_a_disabled_or_deleted_connection_falls_back_to_the_environment_at_once(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setitem(selectors.ENV, "RUNLEDGER_LLM_PROVIDER", "demo")  # type: ignore[index]
    row = connection_upsert(tenant="acme", kind="llm", options={"provider": "rules"})
    assert llm_config_get(tenant="acme").provider == "rules"
    connection_upsert(tenant="acme", kind="llm", options={"provider": "rules"}, enabled=False)
    assert llm_config_get(tenant="acme").provider == "demo"
    connection_upsert(tenant="acme", kind="llm", options={"provider": "anthropic"})
    assert llm_config_get(tenant="acme").provider == "anthropic"
    row.delete()
    assert llm_config_get(tenant="acme").provider == "demo"


def test_a_read_in_flight_when_a_row_is_saved_does_not_hide_the_save() -> None:
    """A slow read that started before a save and finished after it must not be cached."""
    cache: selectors.TimedCache[str] = selectors.TimedCache(lambda: 60.0)
    reading, saved = threading.Event(), threading.Event()

    def slow_load() -> str:
        reading.set()
        saved.wait(5)
        return "before the save"

    got: list[str] = []
    reader = threading.Thread(target=lambda: got.append(cache.get("k", slow_load)))
    reader.start()
    reading.wait(5)
    cache.clear()  # the save's signal
    saved.set()
    reader.join(5)
    assert got == ["before the save"]  # that caller saw what it read…
    assert cache.get("k", lambda: "after the save") == "after the save"  # …but it was not kept
