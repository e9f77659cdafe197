"""A secret of every shape, planted where real calls put it, is read back from every sink.

The shapes: an API key in a query string (ZenRows' `apikey`, in the text of a connection error),
a password in a URL's userinfo, a bearer credential, a Gong webhook's key in its URL path, the
literal value of stored connection credentials quoted in free text, and the failure message of a
`sensitive=True` step. Each reaches the engine as a real step failure or a real request; the
instances error, dead-letter, fire alerts (instance failed, new signature) on a signed webhook, a
Slack-compatible webhook and an email channel, and post their callbacks. Then every sink is read:
the log lines (console and JSON, the access log included), the exported spans (names,
attributes, status, events), what the local receivers and the SMTP server got, and every column
of every table. The marker shared by every secret must be in none of them.
"""

from __future__ import annotations

import io
import json
import logging
import logging.config
import secrets
import socket
from collections.abc import Iterator
from typing import Any

import pytest
from django.test import Client
from django.utils import timezone
from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from dashboard.observability.access import AccessLogger
from dashboard.observability.logconfig import logging_config
from ingest.alerts.callbacks import callback_register
from ingest.alerts.follow import follow_round, follow_start
from ingest.alerts.services import channel_save, rule_save
from ingest.engine import NonRetryableError, Workflow
from ingest.engine.models import DeadLetter, Instance
from ingest.engine.services.instances import instance_create
from ingest.engine.worker.turns import run_until_idle
from ingest.pipelines.selectors import gong_config_get
from ingest.pipelines.services import connection_upsert
from ingest.sources.http import new_session
from ingest.sources.zenrows import ZenRowsClient
from ingest.triggers.services import ingress_secret_create
from tests.fakes.receiver import WebhookReceiver
from tests.fakes.smtp import SmtpServer
from tests.test_planted_secrets import columns_holding
from tests.tracing.support import exported_spans

pytestmark = pytest.mark.django_db(transaction=True)

MARKER = "PLANTED" + secrets.token_hex(8)
ZENROWS_KEY = "zr" + MARKER
URL_PASSWORD = "up" + MARKER
BEARER = "bt" + MARKER
WEBHOOK_KEY = "wh" + MARKER
WRONG_WEBHOOK_KEY = "wx" + MARKER
GONG_KEY, GONG_SECRET = "gk" + MARKER, "gs" + MARKER
SENSITIVE = "pw" + MARKER
HMAC_KEY = "k" * 32
ONCE = {"limit": 0, "delay": 0, "backoff": "constant"}
KINDS = ("zenrows", "userinfo", "bearer", "literal", "sensitive")


def _closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


CLOSED = _closed_port()  # nothing listens: every call there is refused at once


class SecretSpiller(Workflow):
    """Fails, by the kind asked for, with a secret in the failure's text."""

    name = "secret-spiller"

    def run(self, event: Any, step: Any) -> Any:
        kind = event.payload["kind"]
        if kind == "zenrows":
            client = ZenRowsClient(
                api_key=ZENROWS_KEY,
                base_url=f"http://127.0.0.1:{CLOSED}/v1/",
                timeout=(5.0, 5.0),
                max_rate_limit_retries=0,
            )
            return step.do(
                "scrape",
                lambda ctx: client.fetch("https://example.com/pricing").result.url,
                retries=ONCE,
            )
        if kind == "userinfo":
            url = f"http://export:{URL_PASSWORD}@127.0.0.1:{CLOSED}/v1/export"

            def export(ctx: Any) -> int:
                try:
                    return new_session().get(url, timeout=(5.0, 5.0)).status_code
                except OSError as exc:
                    raise NonRetryableError(f"export from {url} failed: {type(exc).__name__}") from None

            return step.do("export", export)
        if kind == "bearer":

            def call(ctx: Any) -> None:
                raise NonRetryableError(f"the CRM refused Bearer {BEARER} for tenant acme")

            return step.do("crm", call)
        if kind == "literal":

            def gong(ctx: Any) -> None:
                config = gong_config_get(tenant="acme")
                raise NonRetryableError(f"Gong refused {config.access_key} / {config.secret}")

            return step.do("gong-login", gong)

        def unlock(ctx: Any) -> None:
            raise NonRetryableError(f"vault refused {SENSITIVE}")

        return step.do("unlock", unlock, sensitive=True)


@pytest.fixture
def log_buffers() -> Iterator[dict[str, io.StringIO]]:
    """Logging configured as settings would, once as console lines and once as JSON lines (two
    handlers, each built by `logging_config`), every logger at DEBUG; restored after."""
    buffers = {"console": io.StringIO(), "json": io.StringIO()}
    names = ("", "runledger", "daphne", "django", "django.request")
    saved = {n: (lg.handlers[:], lg.level, lg.propagate) for n, lg in ((n, logging.getLogger(n)) for n in names)}
    handlers = []
    for fmt, buffer in buffers.items():
        config = logging_config(
            {
                "RUNLEDGER_LOG_FORMAT": fmt,
                "RUNLEDGER_LOG_LEVEL": "DEBUG",
                "RUNLEDGER_DAPHNE_LOG_LEVEL": "DEBUG",
            }
        )
        config["handlers"]["console"]["stream"] = buffer
        logging.config.dictConfig(config)
        handlers.append(logging.getLogger("runledger").handlers[0])
    for name in ("", "runledger", "daphne"):
        logging.getLogger(name).handlers = list(handlers)
        logging.getLogger(name).setLevel(logging.DEBUG)
    for handler in handlers:
        handler.setLevel(logging.DEBUG)
    yield buffers
    for name, (kept, level, propagate) in saved.items():
        logger = logging.getLogger(name)
        logger.handlers, logger.level, logger.propagate = kept, level, propagate


@pytest.fixture
def spans() -> Iterator[InMemorySpanExporter]:
    with exported_spans() as exporter:
        yield exporter


def _span_texts(span: ReadableSpan) -> list[str]:
    texts = [span.name, span.status.description or ""]
    texts += [f"{k}={v}" for k, v in (span.attributes or {}).items()]
    for event in span.events:
        texts += [event.name] + [f"{k}={v}" for k, v in (event.attributes or {}).items()]
    for link in span.links:
        texts += [f"{k}={v}" for k, v in (link.attributes or {}).items()]
    return texts


def _access_lines(paths: list[tuple[str, str, int]]) -> None:
    """What daphne's access log records for these requests, through Runledger's access logger."""
    access = AccessLogger()
    for method, path, status in paths:
        access(
            "http",
            "complete",
            {
                "path": path,
                "client": "127.0.0.1:5000",
                "method": method,
                "status": status,
                "time_taken": 0.01,
                "size": 2,
            },
        )


def _drain_and_follow() -> None:
    for _ in range(3):
        run_until_idle(advance_clock=True)
        follow_round(now=timezone.now())
    run_until_idle(advance_clock=True)


def test_no_planted_secret_reaches_a_log_line_a_span_an_alert_a_callback_or_a_row(
    log_buffers: dict[str, io.StringIO], spans: InMemorySpanExporter
) -> None:
    connection_upsert(
        tenant="acme",
        kind="gong",
        base_url=f"http://127.0.0.1:{CLOSED}",
        key=GONG_KEY,
        secret=GONG_SECRET,
        webhook_key=WEBHOOK_KEY,
    )
    ingress_secret_create(tenant="acme")
    follow_start(now=timezone.now())
    with (
        WebhookReceiver(secret=HMAC_KEY) as hook,
        WebhookReceiver() as slack,
        WebhookReceiver() as callee,
        SmtpServer() as smtp,
    ):
        now = timezone.now()
        channels = [
            channel_save(
                tenant="acme",
                name="ops-hook",
                kind="webhook",
                secrets={"url": hook.url, "hmac_key": HMAC_KEY},
                now=now,
            ),
            channel_save(tenant="acme", name="ops-slack", kind="slack", secrets={"url": slack.url}, now=now),
            channel_save(
                tenant="acme",
                name="ops-mail",
                kind="email",
                now=now,
                config={
                    "to": ["oncall@example.com"],
                    "smtp": {"host": "127.0.0.1", "port": smtp.port},
                },
            ),
        ]
        for condition in ("instance_failed", "dead_letter_new_signature"):
            rule_save(
                tenant="acme",
                name=condition,
                condition=condition,
                params={},
                throttle_seconds=0,
                channel_ids=[c.id for c in channels],
                now=now,
            )
        ids = []
        for kind in KINDS:
            instance = instance_create(workflow="secret-spiller", params={"kind": kind}, tenant="acme")
            callback_register(instance_id=instance.id, tenant="acme", url=callee.url, now=now)
            ids.append(instance.id)

        web = Client()
        hooks = [
            web.post(
                f"/hooks/gong/{key}",
                json.dumps({"isTest": True, "callData": {"metaData": {"id": "7"}}}),
                content_type="application/json",
            )
            for key in (WEBHOOK_KEY, WRONG_WEBHOOK_KEY)
        ]
        assert [r.status_code != 404 for r in hooks] == [True, False]
        _access_lines([("POST", r.request["PATH_INFO"], r.status_code) for r in hooks])

        _drain_and_follow()
        errored = Instance.objects.filter(id__in=ids, status="errored").count()
        assert errored == len(KINDS), list(Instance.objects.filter(id__in=ids).values_list("id", "status"))
        # Alerts: two rules × five failures × three channels; callbacks: one per instance.
        notes = hook.wait_for(2 * len(KINDS), timeout=30)
        pings = slack.wait_for(2 * len(KINDS), timeout=30)
        mails = smtp.wait_for(2 * len(KINDS), timeout=30)
        called = callee.wait_for(len(KINDS), timeout=30)

    received = {
        "webhook": [r.path + json.dumps(r.headers) + r.body.decode() for r in notes],
        "slack": [r.path + r.body.decode() for r in pings],
        "email": [message.as_string() for _, _, message in mails],
        "callback": [r.path + json.dumps(r.headers) + r.body.decode() for r in called],
    }
    exported = spans.get_finished_spans()
    logs = {fmt: buffer.getvalue().splitlines() for fmt, buffer in log_buffers.items()}
    leaks = {
        **{f"log:{fmt}": [line for line in lines if MARKER in line] for fmt, lines in logs.items()},
        **{f"sent:{sink}": [text for text in texts if MARKER in text] for sink, texts in received.items()},
        "spans": [f"{s.name}: {t}" for s in exported for t in _span_texts(s) if MARKER in t],
        "rows": columns_holding(MARKER),
    }
    print({sink: found[:3] for sink, found in leaks.items() if found})
    assert {sink: found for sink, found in leaks.items() if found} == {}

    # The sinks did see every failure, with its secret masked, not nothing at all.
    assert {sink: len(texts) for sink, texts in received.items()} == {
        "webhook": 2 * len(KINDS),
        "slack": 2 * len(KINDS),
        "email": 2 * len(KINDS),
        "callback": len(KINDS),
    }
    webhook_text = "\n".join(received["webhook"])
    assert "apikey=[redacted]" in webhook_text and "Bearer [redacted]" in webhook_text
    assert "http://[redacted]@127.0.0.1" in webhook_text
    assert "vault refused" not in webhook_text  # a sensitive step's message never leaves the ledger
    assert sum("[redacted]" in text for text in received["callback"]) >= 3
    scrape = [s for s in exported if s.name == "step scrape"]
    assert scrape and "apikey=[redacted]" in (scrape[0].status.description or "")
    unlock = [s for s in exported if s.name == "step unlock"]
    assert unlock and "vault refused" not in (unlock[0].status.description or "")
    outbound = [s for s in exported if s.name.startswith("GET ")]
    assert len(outbound) >= 2 and all(s.status.status_code.name == "ERROR" for s in outbound)
    assert any(e.name == "exception" for s in outbound for e in s.events)
    assert any("/hooks/gong/[redacted]" in line for line in logs["json"])
    letters = DeadLetter.objects.filter(instance_id__in=ids)
    assert len({letter.signature for letter in letters}) == len(KINDS)
