from __future__ import annotations

import io
import json
import logging
import logging.config
from collections.abc import Iterator
from datetime import timedelta
from decimal import Decimal
from typing import Any

import pytest
from django.test import Client
from django.utils import timezone
from prometheus_client.parser import text_string_to_metric_families

from dashboard.observability.logconfig import logging_config
from dashboard.observability.models import IngressTally
from ingest.engine import create, get
from ingest.engine.models import Budget, DeadLetter, History, Instance
from ingest.engine.worker.turns import run_until_idle
from ingest.triggers.models import Route
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
    saved = {
        name: (lg.handlers[:], lg.level, lg.propagate)
        for name, lg in [(n, logging.getLogger(n)) for n in ("", "runledger", "daphne")]
    }

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


@pytest.fixture
def busy(db: object) -> None:
    """A ledger holding every kind of state a gauge counts: sleeping, event-waiting and
    backing-off instances, a paused and a terminated one, errored ones with open and discarded
    dead letters, queued ones due, leased, with an expired lease, running under live and
    expired leases, a waitingForPause one, budgets, routes and ingress counts."""
    now = timezone.now()
    for i in range(12):
        create("obs-napper", id=f"nap-{i}", tenant="acme")
        create("obs-waiter", id=f"wait-{i}", tenant="globex")
    for i in range(5):
        create("obs-backing-off", id=f"back-{i}", tenant="acme")
        create("obs-broken", id=f"broken-{i}", tenant="initech")
    create("obs-flaky", id="flaky-done", tenant="acme")
    run_until_idle()
    get("nap-0").pause()
    get("wait-0").terminate()
    DeadLetter.objects.filter(instance_id="broken-0").update(state="discarded")
    for i in range(3):
        create("obs-flaky", id=f"due-{i}", tenant="acme")
    Instance.objects.filter(id="due-0").update(ready_at=now - timedelta(seconds=90))
    Instance.objects.filter(id="due-1").update(
        lease_owner="host-a:1", lease_token="t", lease_expires_at=now + timedelta(seconds=30)
    )
    Instance.objects.filter(id="due-2").update(
        lease_owner="host-b:2", lease_token="t", lease_expires_at=now - timedelta(seconds=5)
    )  # expired: runnable
    # Running as a claim leaves them: ready_at in the past, a lease (live; expired: runnable again).
    Instance.objects.filter(id="nap-1").update(
        status="running",
        ready_at=now - timedelta(seconds=20),
        lease_owner="host-a:1",
        lease_token="t",
        lease_expires_at=now + timedelta(seconds=30),
    )
    Instance.objects.filter(id="nap-2").update(
        status="running",
        ready_at=now - timedelta(seconds=20),
        lease_owner="host-c:3",
        lease_token="t",
        lease_expires_at=now - timedelta(seconds=1),
    )
    Instance.objects.filter(id="wait-1").update(status="waitingForPause", control="pause")
    History.objects.create(
        instance_id="due-1",
        workflow="obs-flaky",
        tenant="acme",
        kind="instance.status",
        status="running",
        created_at=now - timedelta(minutes=3),
    )
    Budget.objects.create(
        scope="tenant",
        key="acme",
        period="month",
        limit=Decimal("10"),
        spent=Decimal("2.5"),
        period_start=now.replace(day=1, hour=0, minute=0, second=0, microsecond=0),
        updated_at=now,
    )
    Budget.objects.create(
        scope="service",
        key="openai",
        period="hour",
        limit=Decimal("1"),
        spent=Decimal("0.9"),
        period_start=now - timedelta(hours=3),
        updated_at=now,
    )
    Budget.objects.create(
        scope="instance",
        key="nap-1",
        period="day",
        limit=Decimal("1"),
        spent=Decimal("0.5"),
        period_start=now,
        updated_at=now,
    )
    Budget.objects.create(
        scope="workflow",
        key="obs-flaky",
        period="day",
        limit=Decimal("0"),
        spent=Decimal("0"),
        period_start=now,
        updated_at=now,
        enabled=False,
    )
    Route.objects.create(name="signup", workflow="obs-flaky", tenant="acme")
    IngressTally.objects.create(route="signup", status=202, n=7)
    IngressTally.objects.create(route="gone-route", status=401, n=2)
    IngressTally.objects.create(route="hooks/gong", status=404, n=1)
