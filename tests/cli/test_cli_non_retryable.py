"""The `runledger` CLI says when a retry cannot help: `retry` of a step that raised
NonRetryableError asks first and points to a replay with edited params, `dead-letters` and a
redrive's preview name such letters; and a retry acts on the instance as the CLI read it."""

from __future__ import annotations

from typing import Any

import pytest
from django.utils import timezone

from dashboard.models import AuditEntry
from dashboard.staleness import dead_letter_version
from ingest.engine.models import DeadLetter, Instance, Step
from tests.cli.test_cli_live import errored, run, tokens  # noqa: F401  (tokens: a fixture)

pytestmark = [pytest.mark.db, pytest.mark.django_db(transaction=True)]


def flat(code: int, out: str) -> tuple[int, str]:
    """The output with the console's line wrapping undone."""
    return code, " ".join(out.split())


def failed_for_good(instance_id: str) -> DeadLetter:
    letter = errored(instance_id)
    now = timezone.now()
    Step.objects.create(
        instance_id=instance_id,
        name="echo",
        seq=1,
        position=1,
        status="errored",
        attempts=1,
        error_name="NonRetryableError",
        error_message="no such account",
        started_at=now,
        ended_at=now,
    )
    DeadLetter.objects.filter(pk=letter.pk).update(error_name="NonRetryableError")
    return letter


def test_retry_of_a_step_that_failed_for_good_asks_first_and_points_to_a_replay(
    live_server: Any,
    tokens: dict[str, str],  # noqa: F811
) -> None:
    failed_for_good("cli-futile-1")
    code, out = flat(*run(live_server, tokens["operator"], "retry", "cli-futile-1", "--reason", "try"))
    assert code == 0 and "non-retryable" in out and "NonRetryableError" in out
    assert "runledger replay cli-futile-1 --params" in out and "nothing was done" in out
    assert Instance.objects.get(pk="cli-futile-1").status == "errored" and not AuditEntry.objects.exists()
    code, out = run(live_server, tokens["operator"], "retry", "cli-futile-1", "--reason", "try", "--yes")
    assert code == 0 and "retried cli-futile-1" in out
    assert Instance.objects.get(pk="cli-futile-1").status == "queued"


def test_dead_letters_and_a_redrive_preview_name_the_letters_a_retry_cannot_help(
    live_server: Any,
    tokens: dict[str, str],  # noqa: F811
) -> None:
    futile, hopeful = failed_for_good("cli-futile-2"), errored("cli-hopeful-2")
    code, out = run(live_server, tokens["operator"], "dead-letters")
    assert code == 0
    rows = {line.split("│")[2].strip(): line for line in out.splitlines() if line.count("│") > 3}
    assert "fails again" in rows["cli-futile-2"] and "may help" in rows["cli-hopeful-2"]
    assert "1 of them failed for good" in flat(code, out)[1]
    code, out = flat(
        *run(live_server, tokens["operator"], "redrive", "--ids", f"{futile.id},{hopeful.id}", "--reason", "r")
    )
    assert code == 0 and f"1 of them ([{futile.id}]) failed for good" in out and "nothing was done" in out


def test_discard_refuses_a_letter_that_moved_since_its_version_was_read(
    live_server: Any,
    tokens: dict[str, str],  # noqa: F811
) -> None:
    letter = errored("cli-stale-1")
    seen = dead_letter_version(letter)  # as GET /api/dead-letters answers it
    run(live_server, tokens["operator"], "retry", "cli-stale-1", "--reason", "provider back")
    code, out = flat(
        *run(
            live_server,
            tokens["operator"],
            "discard",
            str(letter.id),
            "--reason",
            "give up",
            "--expected-version",
            seen,
        )
    )
    assert code == 1 and "stale" in out and "HTTP 409" in out and "was redriven by api:" in out
    assert DeadLetter.objects.get(pk=letter.pk).state == "redriven"
