from __future__ import annotations

from collections.abc import Iterator

import pytest
from django.utils import timezone

from ingest.alerts.follow import follow_start
from ingest.alerts.services import channel_save
from ingest.engine.worker.turns import run_until_idle
from tests.alerts import workflows  # noqa: F401 - registers the test workflows
from tests.fakes.receiver import WebhookReceiver
from tests.fakes.smtp import SmtpServer

HMAC_KEY = "k" * 32


@pytest.fixture
def receiver() -> Iterator[WebhookReceiver]:
    with WebhookReceiver(secret=HMAC_KEY) as r:
        yield r


@pytest.fixture
def smtp() -> Iterator[SmtpServer]:
    with SmtpServer() as s:
        yield s


@pytest.fixture
def following(db):
    """The follower starts at the history's end, as on a fresh deployment."""
    return follow_start(now=timezone.now())


@pytest.fixture
def webhook_channel(db, receiver):
    return channel_save(
        tenant="acme",
        name="ops-hook",
        kind="webhook",
        secrets={"url": receiver.url, "hmac_key": HMAC_KEY},
        now=timezone.now(),
    )


@pytest.fixture
def email_channel(db, smtp):
    return channel_save(
        tenant="acme",
        name="ops-mail",
        kind="email",
        config={"to": ["oncall@example.com"], "smtp": {"host": "127.0.0.1", "port": smtp.port}},
        now=timezone.now(),
    )


@pytest.fixture
def drain():
    def _drain(*, advance_clock: bool = True) -> int:
        """Everything due; with advance_clock, retry delays (and sleeps, and timeouts) pass at once."""
        return run_until_idle(advance_clock=advance_clock)

    return _drain
