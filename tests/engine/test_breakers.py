"""Circuit breakers in the database: shared state, fail fast, one probe, reset with history."""

from __future__ import annotations

import threading
from datetime import timedelta

import pytest

from ingest.engine import Workflow, create
from ingest.engine.breaker import BreakerPolicy
from ingest.engine.clock import clock
from ingest.engine.errors import BreakerNotFound, CircuitOpen
from ingest.engine.models import Attempt, BreakerTransition, CircuitBreaker
from ingest.engine.services.breakers import breaker_admit, breaker_record, breaker_reset
from ingest.sources.errors import SourceError
from ingest.sources.outbound import Circuit

pytestmark = pytest.mark.django_db(transaction=True)
POLICY = BreakerPolicy(threshold=3, window=timedelta(seconds=60), cooldown=timedelta(seconds=30))


@pytest.fixture(autouse=True)
def _frozen() -> None:
    clock.freeze()


def fail(key: str, times: int) -> None:
    for _ in range(times):
        breaker_record(breaker_admit(key=key, policy=POLICY), ok=False, error="HTTP 503")


def transitions(key: str) -> list[tuple[str, str]]:
    return list(BreakerTransition.objects.filter(breaker_id=key).order_by("id").values_list("from_state", "to_state"))


def test_a_key_that_never_failed_has_no_row_and_its_calls_write_nothing() -> None:
    for _ in range(5):
        breaker_record(breaker_admit(key="k", policy=POLICY), ok=True)
    assert not CircuitBreaker.objects.exists()


def test_it_opens_after_the_threshold_and_then_fails_fast_with_retry_after() -> None:
    fail("dfs", 3)
    row = CircuitBreaker.objects.get(key="dfs")
    assert (row.state, row.failures, row.threshold) == ("open", 3, 3)
    clock.advance(timedelta(seconds=10))
    with pytest.raises(CircuitOpen) as raised:
        breaker_admit(key="dfs", policy=POLICY)
    assert raised.value.retry_after == pytest.approx(20.0, abs=0.01)
    assert "dfs" in str(raised.value) and "not made" in str(raised.value)
    assert transitions("dfs") == [("closed", "open")]


def test_after_the_cooldown_one_probe_goes_and_its_success_closes_the_breaker() -> None:
    fail("dfs", 3)
    clock.advance(timedelta(seconds=31))
    ticket = breaker_admit(key="dfs", policy=POLICY)
    assert ticket.probe
    with pytest.raises(CircuitOpen):
        breaker_admit(key="dfs", policy=POLICY)
    breaker_record(ticket, ok=True)
    assert CircuitBreaker.objects.get(key="dfs").state == "closed"
    assert not breaker_admit(key="dfs", policy=POLICY).probe
    assert transitions("dfs") == [("closed", "open"), ("open", "half_open"), ("half_open", "closed")]


def test_a_failed_probe_opens_it_for_another_cooldown() -> None:
    fail("dfs", 3)
    clock.advance(timedelta(seconds=31))
    breaker_record(breaker_admit(key="dfs", policy=POLICY), ok=False, error="still down")
    row = CircuitBreaker.objects.get(key="dfs")
    assert row.state == "open" and row.next_probe_at == clock.now() + timedelta(seconds=30)
    assert "probe call failed" in BreakerTransition.objects.order_by("-id").first().reason


def test_sixteen_threads_racing_for_the_probe_let_exactly_one_through() -> None:
    fail("race", 3)
    clock.advance(timedelta(seconds=31))
    barrier, probes, refused = threading.Barrier(16), [], []

    def caller() -> None:
        from django.db import connection

        try:
            barrier.wait()
            try:
                probes.append(breaker_admit(key="race", policy=POLICY).probe)
            except CircuitOpen:
                refused.append(1)
        finally:
            connection.close()

    threads = [threading.Thread(target=caller) for _ in range(16)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert (probes.count(True), probes.count(False), len(refused)) == (1, 0, 15)
    assert transitions("race").count(("open", "half_open")) == 1


def test_an_operator_reset_closes_it_and_is_history_with_who_and_why() -> None:
    fail("dfs", 3)
    breaker_reset(key="dfs", actor="ops@example.com", reason="provider confirmed fixed")
    assert CircuitBreaker.objects.get(key="dfs").state == "closed"
    last = BreakerTransition.objects.order_by("-id").first()
    assert (last.from_state, last.to_state, last.actor) == ("open", "closed", "ops@example.com")
    assert "provider confirmed fixed" in last.reason
    assert not breaker_admit(key="dfs", policy=POLICY).probe
    with pytest.raises(BreakerNotFound, match="nope"):
        breaker_reset(key="nope")


def test_the_outbound_circuit_counts_outages_only_and_fails_fast_once_open() -> None:
    circuit = Circuit("gong:acme", threshold=2, window=60, cooldown=30, tenant="acme")
    calls = []

    def down() -> None:
        calls.append(1)
        raise SourceError("HTTP 503", retryable=True, status=503)

    def rejected() -> None:
        raise SourceError("HTTP 400", retryable=False, status=400)

    for _ in range(3):
        with pytest.raises(SourceError):
            circuit.call(rejected)
    assert not CircuitBreaker.objects.exists()  # a 4xx is our mistake, not an outage
    for _ in range(2):
        with pytest.raises(SourceError):
            circuit.call(down)
    with pytest.raises(CircuitOpen):
        circuit.call(down)
    assert len(calls) == 2
    assert CircuitBreaker.objects.get(key="gong:acme").tenant == "acme"
    clock.advance(timedelta(seconds=31))
    assert circuit.call(lambda: "back") == "back"
    assert CircuitBreaker.objects.get(key="gong:acme").state == "closed"


class CallsProvider(Workflow):
    name = "t-breaker-calls"

    def run(self, event, step):
        circuit = Circuit("provider:down", threshold=1, window=60, cooldown=300)
        return step.do(
            "call",
            lambda ctx: circuit.call(lambda: "answer"),
            retries={"limit": 3, "delay": "1 second", "backoff": "constant"},
        )


def test_a_step_refused_by_an_open_breaker_retries_no_sooner_than_its_next_probe(drain):
    breaker_record(
        breaker_admit(key="provider:down", policy=BreakerPolicy(threshold=1, cooldown=timedelta(seconds=300))), ok=False
    )
    h = create("t-breaker-calls", id="refused-1")
    drain()
    attempt = Attempt.objects.get(step__instance_id="refused-1", number=1)
    assert attempt.error_name == "CircuitOpen" and attempt.retry_delay_seconds == pytest.approx(300, abs=1)
    assert h.status()["status"] == "waiting"
    clock.advance(timedelta(seconds=301))
    drain()
    assert h.status()["output"] == "answer"  # the probe went through and closed the breaker
    assert CircuitBreaker.objects.get(key="provider:down").state == "closed"
