"""Debounce and batching of the events that start workflows (ingest/triggers/coalesce.py)."""

from __future__ import annotations

import threading
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from django.core.exceptions import ValidationError
from django.db import close_old_connections
from django.test import Client

from ingest.engine.clock import clock
from ingest.engine.models import Instance, Status
from ingest.engine.worker.turns import run_until_idle
from ingest.triggers import coalesce
from ingest.triggers.errors import InvalidCoalesce, InvalidSubscription
from ingest.triggers.models import CoalesceWindow, Route, Subscription
from ingest.triggers.services import (
    coalesce_windows_sweep,
    event_publish,
    route_upsert,
    subscription_create,
)
from tests.triggers.support import signed_post

T0 = datetime(2026, 11, 22, 12, 0, tzinfo=UTC)
DEBOUNCE = {"debounce": {"key": "account", "period": "10 seconds", "timeout": "1 minute"}}


# ---- the setting ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("value", "message"),
    [
        ({"debounce": {}}, "needs a period"),
        ({"debounce": {"period": "10 seconds", "delay": 1}}, "unknown field(s) delay"),
        ({"debounce": {"period": "10 ms"}}, "between 100 milliseconds and 7 days"),
        ({"debounce": {"period": "eventually"}}, "is not a duration"),
        ({"debounce": {"period": "1 minute", "timeout": "10 seconds"}}, "shorter than its period"),
        ({"batch": {"max_size": 1, "timeout": "5 seconds"}}, "from 2 to 1000"),
        ({"batch": {"max_size": True, "timeout": "5 seconds"}}, "from 2 to 1000"),
        ({"batch": {"max_size": 10}}, "needs a timeout"),
        ({"batch": {"max_size": 10, "timeout": "5 seconds", "key": "a..b"}}, "dotted path"),
        ({"debounce": {"period": 5}, "batch": {"max_size": 2, "timeout": 5}}, "one of the two"),
        (["debounce"], "one of the two"),
        ("", "one of the two"),  # not an object: it turns nothing off
        ({"debounce": {"period": "10 seconds", "timeout": False}}, "is not a duration"),
        ({"debounce": {"period": "10 seconds", "timeout": 0}}, "between 100 milliseconds and 7 days"),
    ],
)
def test_a_bad_setting_is_refused_with_what_was_wrong(value: Any, message: str) -> None:
    with pytest.raises(InvalidCoalesce, match=message.replace("(", r"\(").replace(")", r"\)")):
        coalesce.parse(value)


def test_a_good_setting_round_trips() -> None:
    config = coalesce.parse({"debounce": {"key": "customer.id", "period": "30 seconds", "timeout": "5 minutes"}})
    assert config is not None and config.key_path == ("customer", "id")
    assert config.period == timedelta(seconds=30) and config.timeout == timedelta(minutes=5)
    assert coalesce.parse(config.as_json()) == config
    assert coalesce.parse({}) is None and coalesce.parse(None) is None


def test_the_key_is_the_value_at_the_path() -> None:
    config = coalesce.parse({"batch": {"key": "customer.id", "max_size": 5, "timeout": "5 seconds"}})
    assert config is not None
    assert coalesce.key_of(config, {"customer": {"id": "c-1"}}) == "c-1"
    assert coalesce.key_of(config, {"customer": {"id": 7}}) == "7"
    assert coalesce.key_of(config, {"customer": {"id": {"b": 1, "a": 2}}}) == '{"a":2,"b":1}'
    assert coalesce.key_of(config, {"customer": "flat"}) == ""
    assert coalesce.key_of(config, {}) == ""
    long_key = coalesce.key_of(config, {"customer": {"id": "x" * 500}})
    assert long_key.startswith("sha256:") and len(long_key) == 71


@pytest.mark.django_db
def test_the_admin_refuses_a_bad_setting_on_routes_and_subscriptions() -> None:
    with pytest.raises(ValidationError, match="needs a period"):
        Route(name="r", workflow="test-echo", coalesce={"debounce": {}}).full_clean()
    with pytest.raises(ValidationError, match="needs a timeout"):
        Subscription(workflow="test-echo", pattern="a.*", coalesce={"batch": {"max_size": 3}}).full_clean()
    with pytest.raises(InvalidSubscription, match="between 100 milliseconds and 7 days") as refused:
        subscription_create(workflow="test-echo", pattern="a.*", coalesce={"debounce": {"period": "1 ms"}})
    assert set(refused.value.problems) == {"coalesce"}
    assert Subscription.objects.count() == 0


# ---- debounce ---------------------------------------------------------------------------------


@pytest.fixture
def frozen() -> Any:
    clock.freeze(T0)
    yield clock
    clock.reset()


def publish(account: str, n: int, *, type: str = "crm.updated") -> str:
    published = event_publish(type=type, data={"account": account, "n": n}, tenant="acme", now=clock.now())
    assert len(published.started) == 1
    return published.started[0]


@pytest.mark.django_db
def test_debounce_starts_one_instance_per_key_with_the_last_event(frozen: Any) -> None:
    subscription_create(workflow="test-echo", pattern="crm.*", coalesce=DEBOUNCE)
    ids_a = {publish("acme", n) for n in range(5)}
    frozen.advance(timedelta(seconds=3))
    ids_b = {publish("globex", n) for n in range(3)}
    ids_a.add(publish("acme", 99))
    assert len(ids_a) == 1 and len(ids_b) == 1 and ids_a != ids_b
    a = Instance.objects.get(id=ids_a.pop())
    assert a.status == Status.QUEUED and a.ready_at == T0 + timedelta(seconds=13)
    assert a.params["n"] == 99 and a.params["_debounce"]["count"] == 6
    assert run_until_idle() == 0  # inside the quiet period nothing starts
    frozen.advance(timedelta(seconds=11))
    assert run_until_idle() == 2
    a.refresh_from_db()
    assert a.status == Status.COMPLETE and a.output["got"]["n"] == 99
    # The next event after the start opens a new window.
    again = publish("acme", 100)
    assert again != a.id and Instance.objects.filter(workflow="test-echo").count() == 3
    assert CoalesceWindow.objects.get(instance_id=again).count == 1


@pytest.mark.django_db
def test_debounce_timeout_caps_how_long_a_steady_stream_holds_the_first_event(frozen: Any) -> None:
    subscription_create(workflow="test-echo", pattern="crm.*", coalesce=DEBOUNCE)
    first = publish("acme", 0)
    for n in range(1, 20):  # an event every 5 s: each would push the start 10 s on
        frozen.advance(timedelta(seconds=5))
        assert publish("acme", n) in (first, Instance.objects.latest("created_at").id)
    started = Instance.objects.get(id=first)
    assert started.ready_at == T0 + timedelta(minutes=1)
    frozen.advance(timedelta(seconds=5))
    run_until_idle()
    started.refresh_from_db()
    assert started.status == Status.COMPLETE
    # The stream went on past the minute: those events opened a second window.
    assert Instance.objects.filter(workflow="test-echo").count() == 2


# ---- batch ------------------------------------------------------------------------------------


@pytest.mark.django_db
def test_a_batch_starts_when_full_or_at_its_timeout_with_every_event_once(frozen: Any) -> None:
    subscription_create(
        workflow="test-echo", pattern="crm.*", coalesce={"batch": {"max_size": 3, "timeout": "20 seconds"}}
    )
    ids = [publish("acme", n) for n in range(7)]
    assert ids[0] == ids[1] == ids[2] != ids[3] == ids[4] == ids[5] != ids[6]
    full = Instance.objects.get(id=ids[0])
    assert full.ready_at == T0  # full: starts at once
    assert [e["n"] for e in full.params["events"]] == [0, 1, 2] and full.params["_batch"]["count"] == 3
    assert run_until_idle() == 2  # the two full batches
    last = Instance.objects.get(id=ids[6])
    assert last.status == Status.QUEUED and last.params["events"][0]["n"] == 6
    frozen.advance(timedelta(seconds=20))
    assert run_until_idle() == 1
    seen = [e["n"] for i in Instance.objects.order_by("created_at", "id") for e in i.params["events"]]
    assert sorted(seen) == list(range(7))


@pytest.mark.django_db
def test_idle_keys_are_forgotten_once_their_instance_started(frozen: Any) -> None:
    subscription_create(workflow="test-echo", pattern="crm.*", coalesce=DEBOUNCE)
    publish("acme", 1)
    publish("globex", 1)
    assert coalesce_windows_sweep(now=clock.now()) == 0
    frozen.advance(timedelta(seconds=11))
    run_until_idle()
    assert coalesce_windows_sweep(now=clock.now()) == 0  # started, but the keys were active today
    frozen.advance(timedelta(days=1))
    assert coalesce_windows_sweep(now=clock.now()) == 2 and CoalesceWindow.objects.count() == 0
    assert publish("acme", 2) not in Instance.objects.filter(status=Status.COMPLETE).values_list("id", flat=True)


# ---- ingress ----------------------------------------------------------------------------------


@pytest.mark.django_db
def test_a_debounced_route_answers_202_with_its_window(
    client: Client, acme_creds: dict[str, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    from dashboard.api import ingress as ingress_api

    waits: list[float] = []  # how long each answer was allowed to wait for its instance's outcome
    wait = ingress_api.instance_outcome_wait
    monkeypatch.setattr(ingress_api, "instance_outcome_wait", lambda **kw: waits.append(kw["timeout"]) or wait(**kw))
    route_upsert(name="orders", workflow="test-echo", tenant="acme", sync_default=True, coalesce=DEBOUNCE)
    answers = [
        signed_post(
            client,
            "orders",
            {"account": "acme", "n": n},
            token=acme_creds["token"],
            secret=acme_creds["secret"],
            key=f"k-{n}",
        )
        for n in range(3)
    ]
    assert [a.status_code for a in answers] == [202, 202, 202]  # no sync wait for a window
    bodies = [a.json() for a in answers]
    assert len({b["instance_id"] for b in bodies}) == 1
    assert [b["coalesced"]["events"] for b in bodies] == [1, 2, 3]
    assert [b["coalesced"]["opened"] for b in bodies] == [True, False, False]
    assert bodies[0]["coalesced"]["mode"] == "debounce" and bodies[0]["coalesced"]["key"] == "acme"
    assert Instance.objects.get(id=bodies[0]["instance_id"]).params["n"] == 2
    # A repeated Idempotency-Key is the same request: it joins nothing again.
    repeat = signed_post(
        client, "orders", {"account": "acme", "n": 1}, token=acme_creds["token"], secret=acme_creds["secret"], key="k-1"
    )
    assert repeat.status_code == 200 and repeat.json()["created"] is False
    assert CoalesceWindow.objects.get().count == 3
    # Nobody was held for the route's sync wait: the window's instance starts when it closes,
    # for the repeat as for the requests that joined it.
    assert all(timeout <= 0 for timeout in waits)


@pytest.mark.django_db
def test_callers_cannot_forge_the_window_metadata(client: Client, acme_creds: dict[str, str]) -> None:
    route_upsert(name="orders", workflow="test-echo", tenant="acme", coalesce=DEBOUNCE)
    answer = signed_post(
        client,
        "orders",
        {"account": "acme", "_debounce": {"count": 1000}},
        token=acme_creds["token"],
        secret=acme_creds["secret"],
    )
    assert answer.status_code == 400 and answer.json()["error"]["code"] == "reserved_param"
    assert Instance.objects.count() == 0 and CoalesceWindow.objects.count() == 0


def test_route_upsert_refuses_a_bad_setting() -> None:
    with pytest.raises(InvalidCoalesce, match="max_size"):
        route_upsert(name="orders", workflow="test-echo", coalesce={"batch": {"timeout": "5 seconds"}})


# ---- concurrency (PostgreSQL: many web processes at once) --------------------------------------


@pytest.mark.django_db(transaction=True)
def test_concurrent_events_join_one_window_per_key_exactly_once(require_postgres: None) -> None:
    subscription_create(
        workflow="test-echo", pattern="crm.*", coalesce={"debounce": {"key": "account", "period": "1 hour"}}
    )
    errors: list[BaseException] = []

    def send(worker: int) -> None:
        try:
            for n in range(40):
                event_publish(
                    type="crm.updated",
                    data={"account": f"a{n % 5}", "n": n, "w": worker},
                    tenant="acme",
                    now=clock.now(),
                )
        except BaseException as exc:  # noqa: BLE001 - reported below
            errors.append(exc)
        finally:
            close_old_connections()

    threads = [threading.Thread(target=send, args=(w,)) for w in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors
    instances = list(Instance.objects.filter(workflow="test-echo"))
    assert len(instances) == 5
    assert sorted(i.params["account"] for i in instances) == [f"a{k}" for k in range(5)]
    assert sum(i.params["_debounce"]["count"] for i in instances) == 320
