"""`sensitive=True` steps and a workflow's `sensitive_params`: sealed at rest, opened on replay,
"redacted" wherever they are shown."""

from __future__ import annotations

from typing import Any

import pytest
from django.db import connection

from ingest.engine import NonRetryableError, Workflow
from ingest.engine.models import Attempt, DeadLetter, History, Instance, Step
from ingest.engine.selectors import instance_status
from ingest.engine.testing import run_workflow

pytestmark = pytest.mark.django_db

SECRET = "pw-very-secret-0042"


class Vault(Workflow):
    """Opens a secret in a sensitive step, sleeps (so the rest runs on replay), then uses it."""

    name = "vault"
    sensitive_params = ("password",)

    def run(self, event: Any, step: Any) -> Any:
        opened = step.do("open", lambda ctx: {"secret": event.payload["password"]}, sensitive=True)
        step.sleep("nap", "1 hour")
        return step.do("use", lambda ctx: {"matches": opened["secret"] == event.payload["password"]})


class VaultRefusal(Workflow):
    """A sensitive step fails with the secret in its message; `catch` keeps the run going."""

    name = "vault-refusal"
    sensitive_params = ("password",)

    def run(self, event: Any, step: Any) -> Any:
        password = event.payload["password"]

        def refuse(ctx: Any) -> None:
            raise NonRetryableError(f"vault refused {password}")

        if not event.payload.get("catch"):
            return step.do("refuse", refuse, sensitive=True)
        try:
            step.do("refuse", refuse, sensitive=True)
        except NonRetryableError as error:
            message = str(error)
        step.sleep("nap", "1 hour")
        return {"same_message_on_replay": message == f"vault refused {password}"}


def column_text(table: str) -> str:
    with connection.cursor() as cursor:
        cursor.execute(f"SELECT * FROM {table}")
        return repr(cursor.fetchall())


def test_a_sensitive_result_is_sealed_at_rest_and_opened_on_replay() -> None:
    status = run_workflow("vault", params={"password": SECRET, "user": "ann"})
    assert status["status"] == "complete" and status["output"] == {"matches": True}
    assert Instance.objects.get(workflow="vault").run_count >= 2  # "use" ran on a replay
    step = Step.objects.get(name="open")
    assert set(step.result) == {"$sealed"}
    for table in ("engine_step", "engine_instance", "engine_history", "engine_instance_search", "engine_attempt"):
        assert SECRET not in column_text(table), table
    assert status["params"] == {"password": "redacted", "user": "ann"}
    assert [s["result"] for s in status["steps"] if s["name"] == "open"] == [None]


def test_a_sensitive_failure_is_redacted_everywhere_and_sealed_for_replay() -> None:
    status = run_workflow("vault-refusal", params={"password": SECRET})
    assert status["status"] == "errored" and status["error"]["message"] == "redacted"
    step = Step.objects.get(name="refuse")
    assert step.error_message == "redacted" and step.error_traceback.startswith("enc:")
    assert [a.error_message for a in Attempt.objects.filter(step=step)] == ["redacted"]
    dead = DeadLetter.objects.get(instance_id=status["id"])
    assert dead.error_message == "redacted" and dead.error_traceback.startswith("enc:")
    messages = [h.data.get("message") for h in History.objects.filter(instance_id=status["id"]) if "message" in h.data]
    assert messages and set(messages) == {"redacted"}
    for table in ("engine_step", "engine_instance", "engine_history", "engine_deadletter", "engine_attempt"):
        assert SECRET not in column_text(table), table


def test_replay_rebuilds_a_sensitive_failure_with_its_clear_message() -> None:
    status = run_workflow("vault-refusal", params={"password": SECRET, "catch": True})
    assert status["status"] == "complete" and status["output"] == {"same_message_on_replay": True}
    assert instance_status(instance_id=status["id"])["params"]["password"] == "redacted"
