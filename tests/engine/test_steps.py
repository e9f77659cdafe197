"""step.do: memoisation, retries, timeouts, result rules, replay and its checks."""

from __future__ import annotations

import threading
import time
from collections import Counter

import pytest

from ingest.engine import NonRetryableError, Workflow, create, get
from ingest.engine.models import Attempt, DeadLetter, History, Instance, Step

pytestmark = pytest.mark.db

RAN: Counter[str] = Counter()
SEEN: dict[str, object] = {}


@pytest.fixture(autouse=True)
def _reset():
    RAN.clear()
    SEEN.clear()


def count(name, value=None):
    def fn(ctx):
        RAN[name] += 1
        return value if value is not None else name

    return fn


class ThreeSteps(Workflow):
    name = "t-three-steps"

    def run(self, event, step):
        a = step.do("first", count("first", 1))
        step.sleep("pause", "1 hour")
        b = step.do("second", lambda ctx: RAN.update(["second"]) or a + 1)
        return {"a": a, "b": b, "params": event.payload}


@pytest.mark.django_db
def test_it_replays_completed_steps_without_running_them(drain):
    h = create("t-three-steps", id="three-1", params={"k": "v"})
    drain()
    assert get("three-1").status()["status"] == "waiting"
    assert RAN == {"first": 1}
    drain(advance_clock=True)
    status = h.status()
    assert status["status"] == "complete"
    assert status["output"] == {"a": 1, "b": 2, "params": {"k": "v"}}
    assert RAN == {"first": 1, "second": 1}  # the second turn replayed "first" from the ledger


class Repeats(Workflow):
    name = "t-repeats"

    def run(self, event, step):
        return [step.do("same-name", lambda ctx: ctx.count) for _ in range(3)]


@pytest.mark.django_db
def test_the_nth_call_of_a_name_gets_the_nth_stored_result(drain):
    h = create("t-repeats", id="repeats-1")
    drain()
    assert h.status()["output"] == [1, 2, 3]
    assert list(Step.objects.filter(instance_id="repeats-1").order_by("position").values_list("name", "seq")) == [
        ("same-name", 1),
        ("same-name", 2),
        ("same-name", 3),
    ]


class Flaky(Workflow):
    name = "t-flaky"

    def run(self, event, step):
        def fn(ctx):
            RAN["flaky"] += 1
            SEEN.setdefault("keys", []).append(ctx.idempotency_key)
            if ctx.attempt < event.payload["succeed_on"]:
                raise ConnectionError(f"upstream 503 on attempt {ctx.attempt}")
            return ctx.attempt

        return step.do("call-api", fn, retries={"limit": 3, "delay": "2 seconds", "backoff": "linear"})


@pytest.mark.django_db
def test_it_retries_with_the_configured_backoff_and_records_every_attempt(drain):
    h = create("t-flaky", id="flaky-1", params={"succeed_on": 3})
    drain()
    assert h.status()["status"] == "waiting"  # backing off: no thread holds it
    drain(advance_clock=True)
    status = h.status()
    assert status["status"] == "complete" and status["output"] == 3
    attempts = status["steps"][0]["attempts"]
    assert [a["ok"] for a in attempts] == [False, False, True]
    assert [a["retry_delay_seconds"] for a in attempts] == [2.0, 4.0, None]
    assert attempts[0]["error"] == {"name": "ConnectionError", "message": "upstream 503 on attempt 1"}
    assert len(set(SEEN["keys"])) == 1  # one idempotency key across attempts


@pytest.mark.django_db
def test_exhausted_retries_error_the_instance_and_write_a_dead_letter(drain):
    h = create("t-flaky", id="flaky-2", params={"succeed_on": 99})
    drain(advance_clock=True)
    status = h.status()
    assert status["status"] == "errored"
    assert status["error"] == {"name": "ConnectionError", "message": "upstream 503 on attempt 4"}
    assert RAN["flaky"] == 4  # limit 3 = 3 retries after the first attempt
    letter = DeadLetter.objects.get(instance_id="flaky-2")
    assert (letter.step_name, letter.error_name, letter.state) == ("call-api", "ConnectionError", "open")
    assert letter.normalized_message == "upstream <n> on attempt <n>"
    assert "Traceback" in letter.error_traceback


class Fatal(Workflow):
    name = "t-fatal"

    def run(self, event, step):
        def fn(ctx):
            RAN["fatal"] += 1
            raise NonRetryableError("account 42 is closed")

        return step.do("charge", fn, retries={"limit": 5, "delay": 1})


@pytest.mark.django_db
def test_a_non_retryable_error_ends_the_step_after_that_attempt(drain):
    h = create("t-fatal", id="fatal-1")
    drain(advance_clock=True)
    assert RAN["fatal"] == 1
    assert h.status()["error"] == {"name": "NonRetryableError", "message": "account 42 is closed"}


class Caught(Workflow):
    name = "t-caught"

    def run(self, event, step):
        def doomed(ctx):
            raise KeyError("missing")

        try:
            step.do("doomed", doomed, retries={"limit": 0})
        except KeyError as exc:
            RAN["caught"] += 1
            step.sleep("rest", "1 minute")
            return {"recovered_from": str(exc)}


@pytest.mark.django_db
def test_a_stored_failure_is_raised_again_on_replay_not_run_again(drain):
    h = create("t-caught", id="caught-1")
    drain(advance_clock=True)
    assert h.status()["output"] == {"recovered_from": "'missing'"}
    assert RAN["caught"] == 2  # first turn and the replay after the sleep both saw the KeyError
    assert Attempt.objects.filter(step__instance_id="caught-1", step__name="doomed").count() == 1


SPIN_SECONDS = 60.0  # an attempt that is not given up runs this long
SPUN = threading.Event()  # set by the test once it is over: the abandoned attempts stop spinning


class Slow(Workflow):
    name = "t-slow"

    def run(self, event, step):
        def fn(ctx):
            RAN["slow"] += 1
            deadline = time.monotonic() + SPIN_SECONDS
            while time.monotonic() < deadline and not SPUN.is_set():
                pass
            return "never"

        return step.do("spin", fn, timeout="200 milliseconds", retries={"limit": 1, "delay": "1 second"})


@pytest.mark.django_db
def test_an_attempt_past_its_timeout_fails_and_is_retried(drain):
    SPUN.clear()
    started = time.monotonic()
    h = create("t-slow", id="slow-1")
    try:
        drain(advance_clock=True)
    finally:
        SPUN.set()
    # Both attempts were given up at their timeout: either run to its end would take a minute.
    assert time.monotonic() - started < SPIN_SECONDS / 2
    status = h.status()
    assert status["status"] == "errored" and status["error"]["name"] == "StepTimeout"
    assert "timeout of 0.2 s" in status["error"]["message"]
    assert RAN["slow"] == 2


class BadResults(Workflow):
    name = "t-bad-results"

    def run(self, event, step):
        if event.payload["kind"] == "big":
            return step.do("huge", lambda ctx: "x" * (1024 * 1024 + 1))
        return step.do("object", lambda ctx: object())


@pytest.mark.django_db
@pytest.mark.parametrize(
    ("kind", "error", "fragment"),
    [("big", "StepResultTooLarge", "limited to 1 MiB"), ("obj", "StepResultNotSerializable", "not JSON-serialisable")],
)
def test_results_over_1_mib_or_not_json_fail_the_instance_naming_the_step(drain, kind, error, fragment):
    h = create("t-bad-results", id=f"bad-{kind}", params={"kind": kind})
    drain()
    status = h.status()
    assert status["status"] == "errored"
    assert status["error"]["name"] == error
    assert fragment in status["error"]["message"]
    assert ("'huge'" if kind == "big" else "'object'") in status["error"]["message"]


class Config(Workflow):
    name = "t-bad-config"

    def run(self, event, step):
        return step.do("s", lambda: 1, retries={"limit": 1, "jitter": True})


@pytest.mark.django_db
def test_unknown_config_keys_are_rejected_before_the_step_runs(drain):
    h = create("t-bad-config", id="cfg-1")
    drain()
    status = h.status()
    assert status["error"]["name"] == "InvalidStepConfig" and "'jitter'" in status["error"]["message"]
    assert status["steps"] == []


class Changing(Workflow):
    name = "t-changing"

    def run(self, event, step):
        step.do("alpha", lambda: 1)
        step.sleep("nap", 60)
        first = "beta" if not SEEN.get("changed") else "gamma"
        step.do(first, lambda: 2)
        return "done"


@pytest.mark.django_db
def test_a_replay_that_contradicts_history_fails_naming_both_steps(drain):
    from ingest.engine.models import Step as StepRow

    h = create("t-changing", id="chg-1")
    drain(advance_clock=True)
    assert h.status()["status"] == "complete"
    # Rewind: forget "nap" completed so the run replays, then change the code path.
    h.restart(from_step="nap")
    StepRow.objects.create(
        instance_id="chg-1",
        name="beta",
        seq=1,
        position=2,
        kind="do",
        status="complete",
        result=2,
        started_at=Instance.objects.get(id="chg-1").created_at,
    )
    SEEN["changed"] = True
    drain(advance_clock=True)
    status = h.status()
    assert status["status"] == "errored" and status["error"]["name"] == "NonDeterministicReplay"
    assert "'gamma'" in status["error"]["message"] and "'beta'" in status["error"]["message"]


class Context(Workflow):
    name = "t-context"

    def run(self, event, step):
        def fn(ctx):
            return {
                "name": ctx.name,
                "count": ctx.count,
                "attempt": ctx.attempt,
                "key": ctx.idempotency_key,
                "config": ctx.config,
                "tenant": ctx.tenant,
                "workflow": ctx.workflow,
            }

        step.do("look", fn)
        return step.do("look", fn, retries={"limit": 2, "delay": "3 seconds", "backoff": "constant"}, timeout=30)


@pytest.mark.django_db
def test_the_step_context_names_the_step_its_count_attempt_config_and_key(drain):
    h = create("t-context", id="ctx-1", tenant="acme")
    drain()
    assert h.status()["output"] == {
        "name": "look",
        "count": 2,
        "attempt": 1,
        "key": "ctx-1:look:2",
        "tenant": "acme",
        "workflow": "t-context",
        "config": {
            "retries": {
                "limit": 2,
                "delay": 3.0,
                "backoff": "constant",
                "max_delay": 600.0,
                "backoff_coefficient": 2.0,
            },
            "timeout": 30.0,
        },
    }


@pytest.mark.django_db
def test_each_step_row_stores_its_own_config(drain):
    """The config's JSON text is made once per resolved config and reused: two steps with
    different options in one instance each store their own, on SQLite and on PostgreSQL."""
    create("t-context", id="ctx-config")
    create("t-context", id="ctx-config-2")
    drain()
    for instance_id in ("ctx-config", "ctx-config-2"):
        configs = dict(Step.objects.filter(instance_id=instance_id).values_list("seq", "config"))
        assert configs == {
            1: {
                "retries": {
                    "limit": 5,
                    "delay": 10.0,
                    "backoff": "exponential",
                    "max_delay": 600.0,
                    "backoff_coefficient": 2.0,
                },
                "timeout": 600.0,
            },
            2: {
                "retries": {
                    "limit": 2,
                    "delay": 3.0,
                    "backoff": "constant",
                    "max_delay": 600.0,
                    "backoff_coefficient": 2.0,
                },
                "timeout": 30.0,
            },
        }


@pytest.mark.django_db
def test_every_step_writes_its_start_and_finish_to_the_history(drain):
    create("t-repeats", id="hist-1")
    drain()
    kinds = list(History.objects.filter(instance_id="hist-1").order_by("id").values_list("kind", "status"))
    assert kinds[0] == ("instance.created", "queued")
    assert kinds[1] == ("instance.status", "running")
    assert [k for k, _ in kinds].count("step.started") == 3
    assert [k for k, _ in kinds].count("step.completed") == 3
    assert kinds[-1] == ("instance.status", "complete")
