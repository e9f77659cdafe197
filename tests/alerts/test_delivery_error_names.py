"""A delivery the receiver refuses for good ends at once, and its dead letter names what failed."""

from __future__ import annotations

from typing import Any

import pytest
from django.utils import timezone

from ingest.alerts.callbacks import callback_register
from ingest.alerts.follow import follow_round
from ingest.alerts.models import Callback, DeliveryState
from ingest.engine.models import DeadLetter, Instance
from ingest.engine.services.instances import instance_create
from ingest.triggers.services import ingress_secret_create
from tests.fakes.receiver import WebhookReceiver

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def callee(db: Any) -> Any:
    _, _, secret = ingress_secret_create(tenant="acme")
    with WebhookReceiver(secret=secret) as receiver:
        yield receiver


def test_a_callback_refused_with_a_4xx_dead_letters_under_the_notify_error_not_non_retryable(following, callee, drain):
    callee.fail_next(5, status=410)
    inst = instance_create(workflow="alerts-test-ok", params={"n": 1}, tenant="acme")
    callback_register(instance_id=inst.id, tenant="acme", url=callee.url, source="instance", now=timezone.now())
    drain()
    follow_round(now=timezone.now())
    drain()
    follow_round(now=timezone.now())  # reads the delivery's end
    callback = Callback.objects.get(instance_id=inst.id)
    assert (callback.state, callback.attempts, callback.last_status) == (
        DeliveryState.FAILED,
        1,
        410,
    )
    delivery = Instance.objects.get(id=callback.delivery_instance_id)
    assert delivery.status == "errored"
    assert delivery.error_name == "ingest.sources.notify.NotifyError"
    assert "answered 410" in delivery.error_message
    letter = DeadLetter.objects.get(instance_id=delivery.id)
    assert letter.error_name == "ingest.sources.notify.NotifyError"
