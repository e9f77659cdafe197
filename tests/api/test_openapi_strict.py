"""The strict schemathesis run over the REST API: every check, the coverage, fuzzing and stateful
phases, positive and negative data, from /api/openapi.json, plus the fuzz suites' refusal
contract (RefusalContract). It fails on any failure the run reports, so the schema cannot drift from what the server
enforces: a schema-valid request is accepted (or refused with a documented 4xx), a schema-violating one is refused, and
the response
links chain create → get → act."""

from __future__ import annotations

import json
import os
from typing import Any

import pytest
import schemathesis
from django.test.testcases import QuietWSGIRequestHandler
from schemathesis.config import SchemathesisConfig
from schemathesis.engine import events as engine_events
from schemathesis.engine import from_schema
from schemathesis.engine.statistic import Statistic

from tests.fuzzing import api_fuzz_token, ledger_counts

# One test that runs the whole schema (about 6 minutes on a quiet 2-core machine, 14 beside a
# loaded suite): a wider hang detector than the suite's 300 s, which a loaded machine would cross.
pytestmark = [pytest.mark.db, pytest.mark.django_db(transaction=True), pytest.mark.timeout(1800)]

# Examples per operation and phase: large enough to reach every documented refusal, small enough
# that the whole run stays within a few minutes on a loaded two-core machine.
MAX_EXAMPLES = int(os.environ.get("RUNLEDGER_STRICT_EXAMPLES", "4"))
SEED = 20261128
NEGATIVE = ["400", "401", "403", "404", "405", "406", "409", "415", "422", "428", "429"]
POSITIVE = ["2xx", "3xx", "401", "403", "404", "409", "429"]


class RefusalContract:
    """The refusal contract of every fuzz suite (tests/fuzzing.py check_answer), for each response
    of the run: a refused request (4xx) answers the JSON error envelope with a code and a message,
    and changes no ledger row. The run sends one request at a time, so the ledger's row counts
    after one response are the counts before the next request."""

    def __init__(self) -> None:
        self.counts: tuple[int, ...] | None = None

    def after_response(self, ctx: Any, response: Any, case: Any) -> None:
        counts = ledger_counts()
        before, self.counts = self.counts, counts
        status = response.status_code
        if status < 400:
            return
        where = f"{case.method} {case.formatted_path} answered {status}"
        kind = (response.headers.get("content-type") or [""])[0]
        if not kind.startswith("application/json"):
            raise AssertionError(f"{where} as {kind or 'no content type'}, not the JSON envelope")
        if response.content_size == len(response.content):
            error = json.loads(response.content).get("error") or {}
            if not (
                isinstance(error.get("code"), str)
                and error["code"]
                and isinstance(error.get("message"), str)
                and error["message"]
            ):
                raise AssertionError(f"{where} without an error code and message: {response.content[:200]!r}")
        if before is not None and counts != before:
            raise AssertionError(f"{where} and changed ledger rows: {before} -> {counts}")


schemathesis.check(RefusalContract)


def strict_config(token: str) -> SchemathesisConfig:
    return SchemathesisConfig.from_dict(
        {
            "seed": SEED,
            "workers": 1,
            # One connection per request: a keep-alive connection would carry what a refused request
            # left unread into the next one, and hang it.
            "headers": {"Authorization": f"Bearer {token}", "Connection": "close"},
            "request-timeout": 60,
            "generation": {
                "mode": "all",
                "max-examples": MAX_EXAMPLES,
                "deterministic": True,
                "no-shrink": True,
                "database": "none",
                # Every string of the schema refuses U+0000 by its pattern; the stateful phase
                # draws some strings without it, so it is told directly.
                "allow-x00": False,
            },
            # 413 is a refusal too: a body over the size limit, which no JSON Schema keyword can say.
            "checks": {
                "enabled": True,
                "negative_data_rejection": {"expected-statuses": [*NEGATIVE, "413"]},
                "positive_data_acceptance": {"expected-statuses": [*POSITIVE, "413"]},
            },
            "phases": {
                "examples": {"enabled": True},
                "coverage": {"enabled": True},
                "fuzzing": {"enabled": True},
                "stateful": {"enabled": True, "max-steps": 12},
            },
            "suppress-health-check": ["all"],
            # A coalesce setting's durations in words (100 ms to 7 days, "30 seconds") and a
            # debounce timeout no shorter than its period are rules JSON Schema cannot state: a
            # schema-valid setting may be refused, with a 400 that names the field. That holds for
            # the two coalesce PUTs and for a new subscription, whose body may carry one. Every
            # other check holds there too (no 5xx, schema-violating bodies refused, answers as
            # declared).
            # An edit of a connection: which fields it takes and needs depends on the connection's
            # kind, which is in the path, where JSON Schema cannot see it (the create body states
            # each kind's rules, since its kind is in the body).
            "operations": [
                {
                    "include-name-regex": r"^(PUT .*/coalesce|POST /api/subscriptions)$",
                    "checks": {"positive_data_acceptance": {"enabled": False}},
                },
                {
                    "include-path-regex": "/connections/[^/]+/[^/]+$",
                    "exclude-method": ["GET", "DELETE"],
                    "checks": {"positive_data_acceptance": {"enabled": False}},
                },
            ],
        }
    )


def run_strict(base_url: str, token: str) -> tuple[Statistic, list[str]]:
    """Run every phase over HTTP; the statistic counts failures as the CLI does, plus engine errors.
    Over HTTP rather than WSGI: the checks that follow up a request (use after free, resource
    availability) send their own requests, which only the HTTP transport carries."""
    schema = schemathesis.openapi.from_url(f"{base_url}/api/openapi.json", config=strict_config(token))
    statistic = Statistic()
    errors: list[str] = []
    for event in from_schema(schema).execute():
        if isinstance(event, engine_events.ScenarioFinished | engine_events.FuzzScenarioFinished):
            statistic.on_scenario_finished(event.recorder)
        elif isinstance(event, engine_events.NonFatalError):
            errors.append(f"{event.label}: {event.info.format()}"[:2000])
        elif isinstance(event, engine_events.FatalError):
            errors.append(f"fatal: {event.exception!r}")
    return statistic, errors


def describe(statistic: Statistic) -> str:
    lines = []
    for label, groups in sorted(statistic.failures.items()):
        for group in groups.values():
            for failure in group.failures:
                status = group.response.status_code if group.response is not None else "-"
                lines.append(f"{label} [{status}]: {failure.title} — {str(failure.message)[:300]}")
                if group.code_sample:
                    lines.append("    " + group.code_sample.replace("\n", " ")[:600])
    return "\n".join(lines)


@pytest.fixture
def token(transactional_db: Any) -> str:
    from tests.triggers import support  # noqa: F401  (registers the test workflows)

    return api_fuzz_token("strict")


@pytest.fixture
def quick_live_server(live_server: Any, monkeypatch: pytest.MonkeyPatch) -> Any:
    """The live server with Nagle's algorithm off: it writes headers and body apart, and each
    keep-alive request would otherwise wait for the client's delayed ACK (about 40 ms)."""
    monkeypatch.setattr(QuietWSGIRequestHandler, "disable_nagle_algorithm", True, raising=False)
    return live_server


# Nodes one generated request body may hold: the input guard refuses a body over 1 MiB anyway.
def test_the_strict_schemathesis_run_finds_no_failure(quick_live_server: Any, token: str, bounded_tiles: None) -> None:
    live_server = quick_live_server
    statistic, errors = run_strict(live_server.url, token)
    report = describe(statistic)
    print(f"strict run: {statistic.total_cases} cases, {statistic.total_failures} failures, {len(errors)} errors")
    print(report)
    for error in errors:
        print(error)
    assert statistic.total_cases > 0
    assert not errors, "\n".join(errors)
    assert statistic.total_failures == 0, report


def test_the_refusal_contract_fails_a_refusal_that_wrote_or_is_not_the_envelope(transactional_db: Any) -> None:
    from types import SimpleNamespace

    from django.utils import timezone

    from ingest.engine.models import Instance

    def answer(status: int, body: bytes, kind: str = "application/json") -> Any:
        return SimpleNamespace(
            status_code=status, headers={"content-type": [kind]}, content=body, content_size=len(body)
        )

    case = SimpleNamespace(method="POST", formatted_path="/api/instances")
    envelope = b'{"error": {"code": "invalid", "message": "bad"}}'
    contract = RefusalContract()
    contract.after_response(None, answer(201, b"{}"), case)
    contract.after_response(None, answer(422, envelope), case)  # nothing changed: holds
    now = timezone.now()
    Instance.objects.create(
        id="written-by-a-refusal", workflow="w", status="queued", created_at=now, updated_at=now, ready_at=now
    )
    with pytest.raises(AssertionError, match="changed ledger rows"):
        contract.after_response(None, answer(422, envelope), case)
    with pytest.raises(AssertionError, match="not the JSON envelope"):
        contract.after_response(None, answer(400, b"bad", "text/plain"), case)
    with pytest.raises(AssertionError, match="without an error code"):
        contract.after_response(None, answer(400, b'{"error": {"code": ""}}'), case)
