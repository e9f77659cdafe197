"""`NonRetryableError.wrap`: a permanent failure keeps the name of what really failed in the
ledger (attempts, dead letters, the instance's error) while the engine still does not retry it,
and replay raises the same NonRetryableError the first run raised."""

from __future__ import annotations

from collections import Counter

import pytest

from ingest.engine import NonRetryableError, StepFailed, Workflow, create, get
from ingest.engine.models import Attempt, DeadLetter, Step
from ingest.engine.runtime.failures import failure_of, rebuild_error

CALLS: Counter[str] = Counter()
QUOTA_GONE = f"{__name__}.QuotaGone"


class QuotaGone(Exception):
    """The source said the account's quota is gone for good."""

    def __init__(self, account: int) -> None:
        super().__init__(f"account {account} has no quota left")
        self.account = account


@pytest.fixture(autouse=True)
def _calls():
    CALLS.clear()


@pytest.mark.pure
def test_a_wrapped_error_is_stored_under_its_own_class_name_and_message():
    wrapped = NonRetryableError.wrap(QuotaGone(7))
    assert isinstance(wrapped, NonRetryableError)
    assert (wrapped.error_name, str(wrapped)) == (QUOTA_GONE, "account 7 has no quota left")
    failure = failure_of(wrapped)
    assert (failure.name, failure.message) == (QUOTA_GONE, "account 7 has no quota left")
    assert NonRetryableError.wrap(ValueError("bad row")).error_name == "ValueError"
    assert NonRetryableError.wrap(TimeoutError()).args == ("TimeoutError",)  # never an empty message
    # Wrapping twice, or wrapping a StepFailed, keeps the first name.
    assert NonRetryableError.wrap(wrapped).error_name == QUOTA_GONE
    assert NonRetryableError.wrap(StepFailed("gone", name="old.Gone")).error_name == "old.Gone"


@pytest.mark.pure
def test_a_wrapped_error_may_say_more_and_keeps_its_class_name():
    error = QuotaGone(7)
    wrapped = NonRetryableError.wrap(error, f"charging the card failed: {error}; top the account up")
    assert wrapped.error_name == QUOTA_GONE
    assert str(wrapped) == "charging the card failed: account 7 has no quota left; top the account up"
    failure = failure_of(wrapped)
    assert (failure.name, failure.message) == (QUOTA_GONE, str(wrapped))
    assert str(NonRetryableError.wrap(error, "")) == "account 7 has no quota left"  # empty: its own


@pytest.mark.pure
def test_replay_rebuilds_the_wrapper_not_the_class_it_is_named_after():
    failure = failure_of(NonRetryableError.wrap(QuotaGone(7)))
    again = rebuild_error(failure.name, failure.message, failure.state)
    assert type(again) is NonRetryableError
    assert (again.error_name, str(again)) == (QUOTA_GONE, "account 7 has no quota left")
    # A failure stored before the class was kept in the state still rebuilds by its name.
    legacy = rebuild_error(QUOTA_GONE, "account 7 has no quota left", {"args": [7]})
    assert type(legacy) is QuotaGone


def _charge(ctx):
    CALLS["charge"] += 1
    try:
        raise QuotaGone(42)
    except QuotaGone as error:
        raise NonRetryableError.wrap(error) from error


class Charge(Workflow):
    name = "t-wrap-charge"

    def run(self, event, step):
        return step.do("charge", _charge, retries={"limit": 5, "delay": 1})


class ChargeOrFallBack(Workflow):
    name = "t-wrap-fall-back"

    def run(self, event, step):
        try:
            step.do("charge", _charge, retries={"limit": 5, "delay": 1})
        except NonRetryableError as error:
            caught = [type(error).__name__, error.error_name, str(error)]
        step.sleep("nap", "1 hour")  # the output is made on a later turn, from the replayed failure
        return caught


@pytest.mark.db
@pytest.mark.django_db
def test_a_permanent_source_failure_dead_letters_under_the_source_error_s_class_name(drain):
    h = create("t-wrap-charge", id="wrap-1")
    drain(advance_clock=True)
    status = h.status()
    assert status["status"] == "errored"
    assert status["error"] == {"name": QUOTA_GONE, "message": "account 42 has no quota left"}
    assert CALLS["charge"] == 1  # still not retried
    step = Step.objects.get(instance_id="wrap-1", name="charge")
    assert step.error_name == QUOTA_GONE
    assert list(Attempt.objects.filter(step_id=step.id).values_list("error_name", flat=True)) == [QUOTA_GONE]
    letter = DeadLetter.objects.get(instance_id="wrap-1")
    assert (letter.step_name, letter.error_name) == ("charge", QUOTA_GONE)


@pytest.mark.db
@pytest.mark.django_db
def test_a_workflow_that_catches_the_wrapped_error_takes_the_same_path_on_replay(drain):
    create("t-wrap-fall-back", id="wrap-2")
    drain(advance_clock=True)
    status = get("wrap-2").status()
    assert status["status"] == "complete", status["error"]
    assert status["output"] == ["NonRetryableError", QUOTA_GONE, "account 42 has no quota left"]
    assert CALLS["charge"] == 1
