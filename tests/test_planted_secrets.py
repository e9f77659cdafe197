"""A marker planted in every secret and sensitive value is found nowhere in clear.

Connection credentials (Gong, Salesforce, LLM, DataForSEO, ZenRows, webhook keys), an ingress HMAC secret, a
sensitive step's result and failure (message and traceback) and a workflow's sensitive params all
carry one marker. The test then drives the app as people and systems do — a signed ingress
request, a Gong webhook, worker turns, the admin, the REST API and the dashboard pages — with
every logger at DEBUG and the access log written through the configured handler, the
connections' pages and their "test connection", and finally
scans every column of every table with SQL. The marker must be
in no column, no log line and no HTTP answer.
"""

from __future__ import annotations

import io
import json
import logging
import secrets
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import pytest
from django.db import connection
from django.test import Client

from dashboard.access import user_ensure
from dashboard.models import Role
from dashboard.observability.access import AccessLogger
from ingest.engine import NonRetryableError, Workflow
from ingest.engine.models import DeadLetter, Instance
from ingest.engine.worker.turns import run_until_idle
from ingest.pipelines.services import connection_upsert
from ingest.triggers.models import IngressSecret
from ingest.triggers.services import api_token_create, ingress_secret_create, route_upsert
from tests.triggers.support import signed_post

pytestmark = pytest.mark.django_db(transaction=True)

MARKER = "PLANTED" + secrets.token_hex(8)


class SecretKeeper(Workflow):
    """Returns a secret from a sensitive step, or fails one with the secret in its message."""

    name = "secret-keeper"
    sensitive_params = ("password",)

    def run(self, event: Any, step: Any) -> Any:
        password = event.payload["password"]
        assert password.endswith(MARKER)  # the run sees the clear value

        def read(ctx: Any) -> dict[str, str]:
            if event.payload.get("fail"):
                raise NonRetryableError(f"vault refused {password}")
            return {"token": "tok-" + MARKER}

        got = step.do("read-vault", read, sensitive=True)
        # Replay hands the clear result back (the next step sees it).
        return {"length": step.do("measure", lambda ctx: len(got["token"]))}


@pytest.fixture
def planted() -> dict[str, Any]:
    connection_upsert(
        tenant="acme",
        kind="gong",
        base_url="http://127.0.0.1:9",
        key="gk-" + MARKER,
        secret="gs-" + MARKER,
        webhook_key="wh" + MARKER,
    )
    connection_upsert(
        tenant="acme",
        kind="salesforce",
        key="client-id",
        secret="sfs-" + MARKER,
        refresh_token="sfr-" + MARKER,
        webhook_key="sf" + MARKER,
    )
    connection_upsert(tenant="acme", kind="llm", secret="sk-" + MARKER, options={"provider": "rules"})
    connection_upsert(
        tenant="acme", kind="dataforseo", base_url="http://127.0.0.1:9", key="dl-" + MARKER, secret="dp-" + MARKER
    )
    connection_upsert(tenant="acme", kind="zenrows", base_url="http://127.0.0.1:9/v1/", secret="zk-" + MARKER)
    row, token, _ = ingress_secret_create(tenant="acme")
    hmac_secret = "hm-" + MARKER
    IngressSecret.objects.filter(pk=row.pk).update(hmac_secret=hmac_secret)  # sealed by the field
    route_upsert(name="keeper", workflow="secret-keeper", tenant="acme")
    return {"token": token, "hmac": hmac_secret, "ingress_id": row.pk}


@dataclass
class LogCapture:
    """What the configured log handler wrote, the access log included, at DEBUG."""

    stream: io.StringIO
    access: AccessLogger

    def text(self) -> str:
        return self.stream.getvalue()


@pytest.fixture
def log_lines() -> Iterator[LogCapture]:
    """Every logger at DEBUG, written through the handler settings.LOGGING configured (with its
    redaction), into a buffer: exactly the lines an operator's log would get."""
    handler = next(h for h in logging.getLogger("runledger").handlers if isinstance(h, logging.StreamHandler))
    names = ("", "runledger", "runledger.access", "django", "django.request", "django.server", "daphne")
    levels = {name: logging.getLogger(name).level for name in names}
    stream = io.StringIO()
    old = handler.setStream(stream)
    old_level = handler.level
    handler.setLevel(logging.DEBUG)
    for name in names:
        logging.getLogger(name).setLevel(logging.DEBUG)
    try:
        yield LogCapture(stream, AccessLogger())
    finally:
        handler.setStream(old)  # type: ignore[arg-type]
        handler.setLevel(old_level)
        for name, level in levels.items():
            logging.getLogger(name).setLevel(level)


def _access_log(capture: LogCapture, responses: list[Any]) -> None:
    """The access log daphne writes for these requests, through Runledger's access logger (the
    one `python -m dashboard.observability.access` runs daphne with)."""
    for r in responses:
        query = r.request.get("QUERY_STRING", "")
        path = r.request["PATH_INFO"] + (f"?{query}" if query else "")
        capture.access(
            "http",
            "complete",
            {
                "path": path,
                "client": "127.0.0.1:5000",
                "method": r.request["REQUEST_METHOD"],
                "status": r.status_code,
                "time_taken": 0.01,
                "size": len(r.content),
            },
        )


def _answers_with_marker(responses: list[Any]) -> list[str]:
    found = []
    for r in responses:
        body = b"".join(r.streaming_content) if getattr(r, "streaming", False) else r.content
        if MARKER.encode() in body or MARKER in json.dumps({k: v for k, v in r.items()}):
            found.append(f"{r.request['REQUEST_METHOD']} {r.request['PATH_INFO']} → {r.status_code}")
    return found


def _columns_with_marker() -> list[str]:
    return columns_holding(MARKER)


def columns_holding(text: str) -> list[str]:
    """Every column of every table holding `text` in clear, as table.column (n rows)."""
    found = []
    with connection.cursor() as cursor:
        for table in connection.introspection.table_names(cursor):
            for col in connection.introspection.get_table_description(cursor, table):
                qt, qc = connection.ops.quote_name(table), connection.ops.quote_name(col.name)
                cursor.execute(f"SELECT COUNT(*) FROM {qt} WHERE CAST({qc} AS TEXT) LIKE %s", [f"%{text}%"])
                n = cursor.fetchone()[0]
                if n:
                    found.append(f"{table}.{col.name} ({n} rows)")
    return found


def test_a_planted_marker_is_in_no_column_no_log_line_and_no_answer(
    planted: dict[str, Any], log_lines: LogCapture
) -> None:
    web = Client()
    answers: list[Any] = []
    # A real ingress request (signed with the planted HMAC secret) and a real Gong webhook.
    ok = signed_post(web, "keeper", {"password": "pw-" + MARKER}, token=planted["token"], secret=planted["hmac"])
    failing = signed_post(
        web, "keeper", {"password": "pw-" + MARKER, "fail": True}, token=planted["token"], secret=planted["hmac"]
    )
    assert ok.status_code == 202 and failing.status_code == 202, (ok.content, failing.content)
    hook = web.post(
        f"/hooks/gong/wh{MARKER}",
        json.dumps({"isTest": True, "callData": {"metaData": {"id": "7"}}}),
        content_type="application/json",
    )
    assert hook.status_code != 404, "the webhook key must still find its connection"
    answers += [ok, failing, hook]

    run_until_idle()  # worker turns: the sensitive step runs, replays, and fails in the other run
    done, errored = (Instance.objects.get(id=json.loads(r.content)["instance_id"]) for r in (ok, failing))
    assert done.status == "complete" and done.output == {"length": len("tok-" + MARKER)}
    assert errored.status == "errored" and errored.error_message == "redacted"
    dead = DeadLetter.objects.get(instance_id=errored.id)

    # People: the admin, the dashboard, the REST API.
    admin_user = user_ensure(username="root", password="pw-root", memberships=[("acme", Role.ADMIN)], staff=True)
    admin_user.is_superuser = True
    admin_user.save()
    staff = Client()
    staff.force_login(admin_user)
    from ingest.pipelines.models import Connection

    for c in Connection.objects.all():
        answers.append(staff.get(f"/admin/ingest/connection/{c.pk}/change/"))
    answers.append(staff.get("/admin/ingest/connection/"))
    answers.append(staff.get(f"/admin/triggers/ingresssecret/{planted['ingress_id']}/change/"))
    for path in (
        "/instances/",
        f"/instances/{done.id}/",
        f"/instances/{errored.id}/",
        "/dead-letters/",
        f"/dead-letters/{dead.pk}/",
        f"/dead-letters/{dead.pk}/replay/",
        f"/instances/{done.id}/actions/replay/",
    ):
        answers.append(staff.get(path))
    _, api_token = api_token_create(user=admin_user, name="scan")
    bearer = {"Authorization": f"Bearer {api_token}"}
    for path in (
        "/api/instances",
        f"/api/instances/{done.id}",
        f"/api/instances/{errored.id}",
        f"/api/instances/{done.id}/history",
        f"/api/instances/{errored.id}/history",
        "/api/dead-letters",
    ):
        answers.append(web.get(path, headers=bearer))
    assert all(r.status_code == 200 for r in answers[3:]), [(r.request["PATH_INFO"], r.status_code) for r in answers]
    detail = json.loads(answers[-5].content)
    assert detail["params"]["password"] == "redacted"
    assert [s["result"] for s in detail["steps"] if s["name"] == "read-vault"] == ["redacted"]

    # The connections' console pages and API, and a failed "test connection" of each kind with a
    # network (the unreachable port 9): secrets shown only masked, none in the outcome kept or shown.
    for kind in ("gong", "dataforseo", "zenrows"):
        tested = staff.post(f"/connections/acme/{kind}/test/", follow=True)
        assert tested.status_code == 200 and b"Test connection failed" in tested.content, tested.content[:300]
        answers += [
            tested,
            web.post(f"/api/connections/acme/{kind}/test", "{}", content_type="application/json", headers=bearer),
        ]
    for path in (
        "/connections/",
        *(f"/connections/acme/{k}/" for k in ("gong", "salesforce", "llm", "dataforseo", "zenrows")),
        "/connections/acme/gong/delete/",
    ):
        answers.append(staff.get(path))
    answers += [
        web.get("/api/connections", headers=bearer),
        web.get("/api/connections/acme/salesforce", headers=bearer),
    ]
    assert all(r.status_code == 200 for r in answers[-15:]), [
        (r.request["PATH_INFO"], r.status_code) for r in answers[-15:]
    ]

    _access_log(log_lines, answers)
    lines = log_lines.text().splitlines()
    in_columns, in_answers = _columns_with_marker(), _answers_with_marker(answers)
    in_logs = [line for line in lines if MARKER in line]
    found = len(in_columns) + len(in_answers) + len(in_logs)
    print(
        f"planted marker found in clear: {found} (columns {in_columns}, answers {in_answers}, log lines "
        f"{in_logs[:3]}; {len(lines)} log lines and {len(answers)} answers scanned)"
    )
    assert (in_columns, in_answers, in_logs) == ([], [], [])
    # Nor is the ciphertext shown: pages and answers say "redacted" or show a mask.
    assert [r.request["PATH_INFO"] for r in answers if b"enc:gAAAA" in r.content] == []
    # The capture saw the request cycle: the webhook's access line is there, its key redacted.
    assert any("/hooks/gong/" in line for line in lines)


def test_searching_instances_for_a_sensitive_value_finds_nothing(planted: dict[str, Any]) -> None:
    web = Client()
    started = signed_post(
        web, "keeper", {"password": "pw-" + MARKER, "note": "findable"}, token=planted["token"], secret=planted["hmac"]
    )
    instance_id = json.loads(started.content)["instance_id"].encode()
    admin_user = user_ensure(username="root", password="pw-root", memberships=[("acme", Role.ADMIN)], staff=True)
    web.force_login(admin_user)
    listed = web.get("/instances/", {"q": "findable"})
    hidden = web.get("/instances/", {"q": "pw-" + MARKER[:12]})
    assert listed.status_code == hidden.status_code == 200
    assert instance_id in listed.content and instance_id not in hidden.content
