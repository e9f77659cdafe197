"""JSON and console log lines, their context, and secrets redacted from every one."""

from __future__ import annotations

import json
import logging
import logging.config
import os
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path
from typing import Any

import pytest

from dashboard.observability import context
from dashboard.observability.access import AccessLogger
from dashboard.observability.logconfig import logging_config
from dashboard.observability.redact import redact
from tests.observability.conftest import lines

pytestmark = pytest.mark.pure


def test_a_json_line_has_timestamp_level_event_and_the_bound_context(capture: Any) -> None:
    buffer, configure = capture
    configure(RUNLEDGER_LOG_FORMAT="json")
    with (
        context.bind(instance="gong-acme-1", workflow="gong-ingest", tenant="acme", trace_id="abc123"),
        context.bind(step="llm-extract", attempt=2, worker="host:12"),
    ):
        logging.getLogger("runledger.engine").warning("step %s failed", "llm-extract")
    logging.getLogger("runledger.engine").info("outside", extra={"instance": "i-9", "step": "s"})
    first, second = lines(buffer)
    assert first["event"] == "step llm-extract failed"
    assert first["level"] == "WARNING" and first["logger"] == "runledger.engine"
    assert first["timestamp"].endswith("+00:00") and "T" in first["timestamp"]
    assert {k: first[k] for k in context.FIELDS} == {
        "instance": "gong-acme-1",
        "workflow": "gong-ingest",
        "step": "llm-extract",
        "attempt": 2,
        "tenant": "acme",
        "worker": "host:12",
        "trace_id": "abc123",
    }
    # Outside the block the context is gone; a call's own extras carry it instead.
    assert second["instance"] == "i-9" and second["step"] == "s" and "tenant" not in second


def test_console_lines_stay_the_default_and_show_the_context_at_the_end(capture: Any) -> None:
    buffer, configure = capture
    configure()
    with context.bind(instance="i-1", step="fetch"):
        logging.getLogger("runledger").info("turn ended")
    line = buffer.getvalue().strip()
    assert not line.startswith("{")
    assert line.endswith("INFO runledger turn ended [instance=i-1 step=fetch]")


def test_an_unknown_format_is_refused_with_the_variable_named() -> None:
    from django.core.exceptions import ImproperlyConfigured

    with pytest.raises(ImproperlyConfigured, match="RUNLEDGER_LOG_FORMAT='xml'"):
        logging_config({"RUNLEDGER_LOG_FORMAT": "xml"})


@pytest.mark.parametrize("fmt", ["json", "console"])
def test_secrets_are_redacted_from_messages_arguments_and_tracebacks(capture: Any, fmt: str) -> None:
    buffer, configure = capture
    configure(RUNLEDGER_LOG_FORMAT=fmt)
    log = logging.getLogger("runledger.ingest")
    log.warning("GET %s", "/api/x?page=2&token=tok-111&api_key=ak-222&signature=sig-333")
    log.warning("headers %r", {"Authorization": "Bearer bear-444", "Accept": "json"})
    try:
        raise RuntimeError("calling https://h/x?key=key-555&secret=sec-666")
    except RuntimeError:
        log.exception("request failed")
    logging.getLogger("django.request").error("POST /hooks/gong/hook-777 failed")  # via the root
    out = buffer.getvalue()
    for secret in ("tok-111", "ak-222", "sig-333", "bear-444", "key-555", "sec-666", "hook-777"):
        assert secret not in out
    assert "page=2" in out and "[redacted]" in out and "Accept" in out


def test_daphne_access_lines_go_through_logging_redacted(capture: Any) -> None:
    buffer, configure = capture
    configure(RUNLEDGER_LOG_FORMAT="json")
    AccessLogger()(
        "http",
        "complete",
        {
            "path": "/hooks/salesforce/sfkey-1/cdc?token=t-2",
            "status": 202,
            "method": "POST",
            "client": "127.0.0.1:5000",
            "time_taken": 0.012,
            "size": 10,
        },
    )
    (line,) = lines(buffer)
    assert line["logger"] == "runledger.access"
    assert line["status"] == 202 and line["method"] == "POST" and line["duration_ms"] == 12.0
    assert line["path"] == "/hooks/salesforce/[redacted]/cdc?token=[redacted]"
    assert "sfkey-1" not in json.dumps(line) and "t-2" not in json.dumps(line)


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def test_a_real_daphne_logs_its_access_lines_as_json_without_the_secrets(tmp_path: Path) -> None:
    port = _free_port()
    env = {
        **os.environ,
        "RUNLEDGER_LOG_FORMAT": "json",
        "DJANGO_SETTINGS_MODULE": "dashboard.settings",
        "DATABASE_URL": f"sqlite:///{tmp_path}/db.sqlite3",
    }
    log = tmp_path / "daphne.log"
    out = log.open("wb")
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "dashboard.observability.access",
            "-b",
            "127.0.0.1",
            "-p",
            str(port),
            "dashboard.asgi:application",
        ],
        cwd=Path(__file__).resolve().parents[2],
        env=env,
        stdout=out,
        stderr=subprocess.STDOUT,
    )
    try:
        deadline = time.monotonic() + 30
        while True:
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/healthz?token=tk-secret-9&x=1", timeout=2) as r:
                    assert r.status == 200
                break
            except OSError:
                assert time.monotonic() < deadline, "daphne did not start"
                time.sleep(0.2)
    finally:
        # The access line is written once the answer went out: wait for it, not for a while.
        deadline = time.monotonic() + 30
        while b'"runledger.access"' not in log.read_bytes() and time.monotonic() < deadline:
            time.sleep(0.05)
        proc.terminate()
        proc.wait(timeout=20)
        out.close()
    output = log.read_text()
    access = [json.loads(line) for line in output.splitlines() if line.startswith("{") and '"runledger.access"' in line]
    assert access, output
    assert access[-1]["path"] == "/healthz?token=[redacted]&x=1"
    assert access[-1]["status"] == 200
    assert "tk-secret-9" not in output


def test_redaction_keeps_what_is_not_secret() -> None:
    assert redact("tokens_in=5 status_code=200 monkey=1") == "tokens_in=5 status_code=200 monkey=1"
    assert redact("/api/instances?workflow=gong-ingest") == "/api/instances?workflow=gong-ingest"
    assert redact("x-runledger-signature: abc") == "x-runledger-signature: [redacted]"


def test_a_request_with_a_traceparent_logs_its_trace_id(capture: Any) -> None:
    from django.http import HttpRequest, HttpResponse

    from dashboard.observability.middleware import TraceContextMiddleware, trace_id_from

    buffer, configure = capture
    configure(RUNLEDGER_LOG_FORMAT="json")

    def view(request: HttpRequest) -> HttpResponse:
        logging.getLogger("runledger.api").info("handled")
        return HttpResponse("ok")

    request = HttpRequest()
    request.META["HTTP_TRACEPARENT"] = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
    TraceContextMiddleware(view)(request)
    TraceContextMiddleware(view)(HttpRequest())
    with_trace, without = lines(buffer)
    assert with_trace["trace_id"] == "4bf92f3577b34da6a3ce929d0e0e4736"
    assert "trace_id" not in without
    assert trace_id_from("00-" + "0" * 32 + "-00f067aa0ba902b7-01") is None
    assert trace_id_from("garbage") is None


def test_a_long_header_of_dotted_words_is_redacted_in_one_pass():
    # "a.a.a.…" made the old name pattern retry every prefix of the run: minutes per log line.
    hostile = "a." * 50_000
    assert redact(hostile) == hostile
    assert redact(hostile + " x.api_key=s3cret") == hostile + " x.api_key=[redacted]"
    assert redact("-" * 40_000 + "token=t") == "-" * 40_000 + "token=[redacted]"
