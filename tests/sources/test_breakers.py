"""Every outbound call of a step goes through the breaker of its provider and tenant: a provider
down for five minutes under many running instances gets the threshold's calls and one probe per
cooldown, the waiting runs spend no retry and hold no budget, and they finish once it is back."""

from __future__ import annotations

import math
from datetime import timedelta
from typing import Any

import pytest
from django.test import override_settings

from ingest.engine import Workflow, create
from ingest.engine.clock import clock
from ingest.engine.errors import CircuitOpen
from ingest.engine.models import Attempt, Budget, BudgetReservation, CircuitBreaker, Instance
from ingest.engine.services.budgets import budget_upsert
from ingest.engine.worker.turns import run_until_idle
from ingest.sources.breakers import guarded_send
from ingest.sources.gong import GongClient, GongServerError
from ingest.sources.http import RateLimiter
from ingest.sources.outbound import InProcess
from tests.fakes.gong import FakeGong
from tests.fakes.server import Planned

pytestmark = pytest.mark.django_db(transaction=True)

RUNS = 40
THRESHOLD, COOLDOWN = 5, 30.0
OUTAGE = 300  # seconds the provider is down
SETTINGS = {
    "RUNLEDGER_BREAKER_THRESHOLD": THRESHOLD,
    "RUNLEDGER_BREAKER_WINDOW": 60.0,
    "RUNLEDGER_BREAKER_COOLDOWN": COOLDOWN,
    "RUNLEDGER_BREAKER_PROBE_TIMEOUT": 120.0,
}
PROVIDER: dict[str, str] = {}  # the fake's URL, for the workflow


class FlakyGong(FakeGong):
    """The fake Gong, answering 503 to everything while `down`; every request is recorded."""

    down = False

    def respond(self, method: str, raw_path: str, headers: dict[str, str], body: bytes) -> Planned:
        planned = super().respond(method, raw_path, headers, body)
        return Planned(503, {"errors": ["service unavailable"]}) if self.down else planned


class FetchTranscript(Workflow):
    name = "t-breaker-transcript"

    def run(self, event: Any, step: Any) -> Any:
        def fetch(ctx: Any) -> int:
            ctx.check_budget("gong", "0.01")
            client = GongClient(
                access_key="gong-key",
                access_key_secret="gong-secret",
                base_url=PROVIDER["url"],
                limiter=InProcess(RateLimiter(10_000, 1.0)),
            )
            transcript = client.transcript(event.payload["call"])
            return 0 if transcript is None else len(transcript.monologues)

        return step.do("fetch-transcript", fetch, retries={"limit": 3, "delay": "1 second", "backoff": "constant"})


@pytest.fixture
def gong():
    with FlakyGong() as fake:
        PROVIDER["url"] = fake.url
        yield fake


def _start(gong: FlakyGong, tenant: str = "acme") -> list[str]:
    call = gong.calls[0].id
    return [
        create("t-breaker-transcript", id=f"{tenant}-{n}", params={"call": call}, tenant=tenant).id for n in range(RUNS)
    ]


def _run_for(seconds: float, *, every: float = 5.0) -> None:
    """The workers, with the engine's clock moving `every` seconds at a time."""
    for _ in range(int(seconds / every)):
        run_until_idle()
        clock.advance(timedelta(seconds=every))
    run_until_idle()


def _statuses(ids: list[str]) -> dict[str, int]:
    counts: dict[str, int] = {}
    for status in Instance.objects.filter(id__in=ids).values_list("status", flat=True):
        counts[status] = counts.get(status, 0) + 1
    return counts


@override_settings(**SETTINGS)
def test_an_outage_costs_the_threshold_and_one_probe_per_cooldown_and_the_runs_finish_once_it_is_back(gong):
    clock.freeze()
    budget_upsert(scope="tenant", key="acme", period="day", limit="100", actor="ana")
    gong.down = True
    ids = _start(gong)
    _run_for(OUTAGE)
    during = gong.count()
    probes = math.ceil(OUTAGE / COOLDOWN)
    assert during <= THRESHOLD + probes  # 15 here; without breakers every attempt of every run: 160
    assert _statuses(ids) == {"waiting": RUNS}  # none spent its retries and errored
    assert not BudgetReservation.objects.filter(state="held").exists()  # a waiting run holds no budget
    assert Budget.objects.get(key="acme").reserved == 0
    breaker = CircuitBreaker.objects.get(key="gong:acme")
    assert (breaker.state, breaker.tenant) == ("open", "acme")
    # The refusals are recorded and counted against no retry limit.
    assert Attempt.objects.filter(error_name="CircuitOpen").count() >= RUNS
    # A failed probe is the breaker's finding, not its run's failure: recorded as the breaker
    # open again, so the run that probes every cool-down keeps its retries (on SQLite's in-process
    # worker the same run is first due each time, and it used to die of the outage).
    probes_failed = Attempt.objects.filter(error_name="CircuitOpen", error_message__contains="was its probe")
    assert probes_failed.count() >= probes - 1
    gong.down = False
    back = gong.count()
    _run_for(COOLDOWN + 5)  # the next probe closes it; the turned-away runs recheck soon after
    assert _statuses(ids) == {"complete": RUNS}
    assert gong.count() - back == RUNS  # one call per run once it is back, none wasted
    assert CircuitBreaker.objects.get(key="gong:acme").state == "closed"
    assert not BudgetReservation.objects.filter(state="held").exists()


@override_settings(**SETTINGS)
def test_one_tenants_outage_leaves_another_tenants_breaker_closed(gong):
    clock.freeze()
    gong.down = True
    acme = _start(gong, "acme")
    _run_for(10)
    assert CircuitBreaker.objects.get(key="gong:acme").state == "open"
    gong.down = False
    globex = _start(gong, "globex")
    _run_for(5)
    assert _statuses(globex) == {"complete": RUNS}
    assert not CircuitBreaker.objects.filter(key="gong:globex").exists()  # never failed: no row
    assert _statuses(acme) == {"waiting": RUNS}


@override_settings(RUNLEDGER_BREAKER_THRESHOLD=0)
def test_with_breakers_off_every_attempt_of_every_run_reaches_the_provider(gong):
    clock.freeze()
    gong.down = True
    ids = _start(gong)
    _run_for(60)
    assert gong.count() == RUNS * 4  # the first attempt and three retries each
    assert _statuses(ids) == {"errored": RUNS}
    assert not CircuitBreaker.objects.exists()


@override_settings(**SETTINGS)
def test_outside_a_step_a_request_is_sent_without_a_breaker(gong):
    gong.down = True
    client = GongClient(
        access_key="gong-key",
        access_key_secret="gong-secret",
        base_url=gong.url,
        limiter=InProcess(RateLimiter(10_000, 1.0)),
    )
    for _ in range(THRESHOLD + 3):
        with pytest.raises(GongServerError):
            client.transcript(gong.calls[0].id)
    assert gong.count() == THRESHOLD + 3 and not CircuitBreaker.objects.exists()


def test_a_4xx_or_429_is_the_provider_answering_and_closes_a_half_open_breaker() -> None:
    from ingest.engine import logcontext
    from ingest.sources.breakers import breaker_key, breaker_policy

    clock.freeze()
    answers = iter([503] * THRESHOLD + [404])

    class Answer:
        def __init__(self, status: int) -> None:
            self.status_code = status

    def send() -> Any:
        return Answer(next(answers))

    with override_settings(**SETTINGS), logcontext.bind(step="s", tenant="acme"):
        policy = breaker_policy()
        assert policy is not None and breaker_key("zenrows", "acme") == "zenrows:acme"
        for _ in range(THRESHOLD):
            assert guarded_send("zenrows", send).status_code == 503
        with pytest.raises(CircuitOpen):
            guarded_send("zenrows", send)
        clock.advance(timedelta(seconds=COOLDOWN + 1))
        assert guarded_send("zenrows", send).status_code == 404  # the probe: the provider answered
    assert CircuitBreaker.objects.get(key="zenrows:acme").state == "closed"
