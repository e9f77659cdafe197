from __future__ import annotations

import io
import json
import logging
import logging.config
from collections.abc import Iterator
from typing import Any

import pytest
from django.test import Client
from prometheus_client.parser import text_string_to_metric_families

from dashboard.observability.logconfig import logging_config
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


@pytest.fixture
def capture() -> Iterator[tuple[io.StringIO, dict[str, str]]]:
    """Configure logging as settings would (env chosen by the test) into a buffer; restore after."""
    buffer, env = io.StringIO(), {}
    saved = {name: (lg.handlers[:], lg.level, lg.propagate) for name, lg in
             [(n, logging.getLogger(n)) for n in ("", "runledger", "daphne")]}

    def configure(**variables: str) -> None:
        env.update(variables)
        config = logging_config(env)
        config["handlers"]["console"]["stream"] = buffer
        logging.config.dictConfig(config)

    yield buffer, configure  # type: ignore[misc]
    for name, (handlers, level, propagate) in saved.items():
        logger = logging.getLogger(name)
        logger.handlers, logger.level, logger.propagate = handlers, level, propagate


def lines(buffer: io.StringIO) -> list[dict[str, Any]]:
    return [json.loads(line) for line in buffer.getvalue().splitlines() if line.strip()]
