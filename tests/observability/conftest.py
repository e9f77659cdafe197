from __future__ import annotations

from typing import Any

import pytest
from django.test import Client
from prometheus_client.parser import text_string_to_metric_families

from tests.observability import workflows  # noqa: F401  (registers the test workflows)

Samples = dict[tuple[str, frozenset[tuple[str, str]]], float]


def parse(text: str) -> Samples:
    """Every sample of a scrape, keyed by its name and labels (parsed by prometheus-client)."""
    out: Samples = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            out[(sample.name, frozenset(sample.labels.items()))] = sample.value
    return out


def value(samples: Samples, name: str, **labels: str) -> float | None:
    return samples.get((name, frozenset(labels.items())))


def scrape(client: Client, **headers: Any) -> Samples:
    response = client.get("/metrics", REMOTE_ADDR="127.0.0.1", **headers)
    assert response.status_code == 200, response.content
    assert response["Content-Type"].startswith("text/plain")
    return parse(response.content.decode())


@pytest.fixture
def web() -> Client:
    return Client()
