"""The scrape's own text writer for counters and histograms answers what prometheus-client's
generate_latest answers for the same families, byte for byte."""

from __future__ import annotations

import pytest
from django.utils import timezone
from prometheus_client import generate_latest

from dashboard.observability import collector
from dashboard.observability.tally import INSTANCE_BUCKETS, STEP_BUCKETS, Series
from ingest.engine import create
from ingest.engine.worker.turns import run_until_idle


def _values() -> dict[Series, float]:
    odd = 'say "hi" \\ back\nslash é'
    values: dict[Series, float] = {
        ("started", ("gong-ingest",)): 12.0,
        ("started", (odd,)): 1.0,
        ("finished", ("gong-ingest", "complete")): 10.0,
        ("finished", ("gong-ingest", "errored")): 2.0,
        ("attempts", ("gong-ingest", "llm-extract")): 1e21,
        ("retries", ("gong-ingest", odd)): 3.0,
        ("failures", ("url-classify", "persist-facts-N")): 0.0,
        ("cost", ("openai", "gong-ingest", "acme")): 0.1 + 0.2,
        ("cost", ("s3", "crm", "globex")): 1234567.891,
        ("step_seconds_sum", ("gong-ingest", "llm-extract")): 41.5,
        ("step_seconds_count", ("gong-ingest", "llm-extract")): 3.0,
        ("instance_seconds_sum", ("gong-ingest", "complete")): 900.25,
    }
    for i in (0, 3, len(STEP_BUCKETS)):
        values[("step_seconds", ("gong-ingest", "llm-extract", str(i)))] = float(i + 1)
    values[("step_seconds", (odd, "x", "2"))] = 5.0
    for i in (1, len(INSTANCE_BUCKETS)):
        values[("instance_seconds", ("gong-ingest", "complete", str(i)))] = 4.0
    return values


@pytest.mark.pure
@pytest.mark.parametrize("values", [_values(), {}], ids=["series", "empty"])
def test_counter_text_is_what_generate_latest_writes(values: dict[Series, float]) -> None:
    expected = generate_latest(collector._Families(list(collector.counter_families(values))))
    assert collector.counter_text(values).encode() == expected
    assert collector.counter_text(values).encode() == expected  # and again from the cached prefixes


def _without_read_time(text: bytes) -> list[str]:
    return [ln for ln in text.decode().splitlines() if not ln.startswith("runledger_metrics_read_seconds ")]


@pytest.mark.db
def test_a_scrape_is_what_the_registry_gives_through_generate_latest(
    db: object, monkeypatch: pytest.MonkeyPatch
) -> None:
    create("obs-flaky", id="flaky-x", tenant="acme")
    create("obs-broken", id="broken-x", tenant="acme")
    create("obs-napper", id="napper-x", tenant="acme")
    run_until_idle()
    at = timezone.now()
    monkeypatch.setattr(collector.timezone, "now", lambda: at)  # the ages are read against it
    fast, reference = collector.exposition(), generate_latest(collector.registry())
    assert "runledger_step_duration_seconds_bucket" in fast.decode()
    assert _without_read_time(fast) == _without_read_time(reference)
