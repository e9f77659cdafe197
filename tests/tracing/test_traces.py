"""OpenTelemetry traces, read from the SDK's in-memory exporter: a trace per instance, a span per
turn and per step attempt with its attributes, outbound HTTP as children, ingress linked."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest
from django.test import Client
from django.utils import timezone
from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from ingest.engine import NonRetryableError, Workflow, tracing
from ingest.engine.models import History
from ingest.engine.services.instances import instance_create
from ingest.engine.worker.turns import run_until_idle
from ingest.sources.llm.openai import OpenAIChatClient
from ingest.triggers.services import ingress_secret_create, route_upsert
from tests.fakes import FakeOpenAI
from tests.tracing.support import exported_spans
from tests.triggers.support import signed_post

pytestmark = pytest.mark.django_db(transaction=True)
CALLER = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"


class Traced(Workflow):
    name = "tracing-test"

    def run(self, event: Any, step: Any) -> Any:
        def flaky(ctx: Any) -> int:
            if ctx.attempt == 1:
                raise RuntimeError("first attempt fails")
            ctx.track_cost("openai", cost="0.25", model="gpt-4o-mini")
            return ctx.attempt

        first = step.do("flaky", flaky, retries={"limit": 2, "delay": 0, "backoff": "constant"})
        if event.payload.get("llm"):
            client = OpenAIChatClient(base_url=event.payload["llm"], api_key="sk-fake")
            step.do("ask", lambda ctx: client.complete_json([{"role": "user", "content": "Call notes"}]).data)
        if event.payload.get("child"):
            step.child("spawn", workflow="tracing-test-child", params={})
        if event.payload.get("fail"):
            step.do("boom", lambda ctx: (_ for _ in ()).throw(NonRetryableError("no")))
        return {"first": first}


class TracedChild(Workflow):
    name = "tracing-test-child"

    def run(self, event: Any, step: Any) -> Any:
        return step.do("child-work", lambda ctx: 1)


@pytest.fixture
def spans() -> Iterator[InMemorySpanExporter]:
    with exported_spans() as exporter:
        yield exporter


def _named(exporter: InMemorySpanExporter, prefix: str) -> list[ReadableSpan]:
    return [s for s in exporter.get_finished_spans() if s.name.startswith(prefix)]


def test_tracing_is_off_unless_the_otel_variables_ask_for_it():
    assert tracing.enabled_by({}) is False
    assert tracing.enabled_by({"OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:4318"}) is True
    assert tracing.enabled_by({"OTEL_TRACES_EXPORTER": "otlp"}) is True
    assert tracing.enabled_by({"OTEL_TRACES_EXPORTER": "none", "OTEL_EXPORTER_OTLP_ENDPOINT": "http://x"}) is False
    assert tracing.enabled_by({"OTEL_SDK_DISABLED": "true", "OTEL_TRACES_EXPORTER": "otlp"}) is False
    assert tracing.ENABLED is False  # the test environment sets none of them


def test_an_instance_is_one_trace_of_turns_and_step_attempts_under_its_root(spans):
    inst = instance_create(workflow="tracing-test", params={}, tenant="acme")
    run_until_idle()
    trace_id = int(tracing.trace_id_hex(inst.id), 16)
    every = spans.get_finished_spans()
    assert {s.context.trace_id for s in every} == {trace_id}
    [root] = _named(spans, "instance ")
    assert root.parent is None and root.context.span_id == tracing.instance_ids(inst.id)[1]
    assert root.attributes["runledger.outcome"] == "complete"
    turns = _named(spans, "turn ")
    assert turns and all(t.parent.span_id == root.context.span_id for t in turns)
    attempts = sorted(_named(spans, "step flaky"), key=lambda s: s.attributes["runledger.attempt"])
    assert [(a.attributes["runledger.attempt"], a.attributes["runledger.outcome"]) for a in attempts] == [
        (1, "RuntimeError"),
        (2, "ok"),
    ]
    assert attempts[1].attributes["runledger.cost_usd"] == 0.25
    assert attempts[1].attributes["runledger.tenant"] == "acme"
    assert attempts[1].attributes["runledger.workflow"] == "tracing-test"
    assert {a.parent.span_id for a in attempts} <= {t.context.span_id for t in turns}


def test_a_failed_instance_marks_its_root_and_turn_as_errors(spans):
    inst = instance_create(workflow="tracing-test", params={"fail": True}, tenant="acme")
    run_until_idle()
    [root] = _named(spans, "instance ")
    assert root.attributes["runledger.outcome"] == "errored" and root.status.status_code.name == "ERROR"
    [boom] = _named(spans, "step boom")
    assert boom.attributes["runledger.outcome"] == "NonRetryableError"
    assert root.context.trace_id == int(tracing.trace_id_hex(inst.id), 16)


def test_an_llm_call_is_a_client_span_under_its_step_and_carries_the_traceparent(spans):
    with FakeOpenAI() as fake:
        inst = instance_create(workflow="tracing-test", params={"llm": f"{fake.url}/v1"}, tenant="acme")
        run_until_idle()
        sent = fake.requests[-1].header("traceparent")
    [ask] = _named(spans, "step ask")
    [call] = _named(spans, "POST 127.0.0.1")
    assert call.parent.span_id == ask.context.span_id
    assert call.attributes["http.response.status_code"] == 200
    assert sent == f"00-{tracing.trace_id_hex(inst.id)}-{call.context.span_id:016x}-01"


def test_a_child_instance_has_its_own_trace_linked_to_its_parent(spans):
    parent = instance_create(workflow="tracing-test", params={"child": True}, tenant="acme")
    run_until_idle()
    [child_root] = _named(spans, "instance tracing-test-child")
    assert child_root.context.trace_id != int(tracing.trace_id_hex(parent.id), 16)
    [link] = child_root.links
    assert (link.context.trace_id, link.context.span_id) == tracing.instance_ids(parent.id)


def test_the_ingress_traceparent_is_kept_on_the_instance_and_linked_from_its_spans(spans):
    _, token, secret = ingress_secret_create(tenant="acme")
    route_upsert(name="traced", workflow="tracing-test", tenant="acme")
    raw = json.dumps({}).encode()
    stamp = str(int(timezone.now().timestamp()))
    from ingest.triggers.signing import sign

    answer = Client().post(
        "/api/routes/traced",
        data=raw,
        content_type="application/json",
        headers={
            "Authorization": f"Bearer {token}",
            "X-Runledger-Timestamp": stamp,
            "X-Runledger-Signature": sign(secret=secret, timestamp=stamp, body=raw),
            "traceparent": CALLER,
        },
    )
    assert answer.status_code == 202
    instance_id = answer.json()["instance_id"]
    [ingress] = _named(spans, "POST /api/routes/traced")
    assert ingress.parent.span_id == int(CALLER.split("-")[2], 16)
    stored = History.objects.get(instance_id=instance_id, kind="instance.created").data["traceparent"]
    assert stored == f"00-{ingress.context.trace_id:032x}-{ingress.context.span_id:016x}-01"
    run_until_idle()
    [root] = _named(spans, "instance ")
    assert [(link.context.trace_id, link.context.span_id) for link in root.links] == [
        (ingress.context.trace_id, ingress.context.span_id)
    ]


def test_with_tracing_off_a_callers_valid_traceparent_is_still_kept_and_nothing_is_recorded(db):
    _, token, secret = ingress_secret_create(tenant="acme")
    route_upsert(name="untraced", workflow="tracing-test", tenant="acme")
    answer = signed_post(Client(), "untraced", {}, token=token, secret=secret)
    assert answer.status_code == 202
    assert (
        "traceparent" not in History.objects.get(instance_id=answer.json()["instance_id"], kind="instance.created").data
    )
    assert tracing.valid_traceparent(CALLER) == CALLER
    assert tracing.valid_traceparent("00-" + "0" * 32 + "-b7ad6b7169203331-01") is None
    assert tracing.valid_traceparent("garbage") is None


def _post_traced(route: str) -> str:
    _, token, secret = ingress_secret_create(tenant="acme")
    route_upsert(name=route, workflow="tracing-test", tenant="acme")
    raw = json.dumps({}).encode()
    stamp = str(int(timezone.now().timestamp()))
    from ingest.triggers.signing import sign

    answer = Client().post(
        f"/api/routes/{route}",
        data=raw,
        content_type="application/json",
        headers={
            "Authorization": f"Bearer {token}",
            "X-Runledger-Timestamp": stamp,
            "X-Runledger-Signature": sign(secret=secret, timestamp=stamp, body=raw),
            "traceparent": CALLER,
        },
    )
    assert answer.status_code == 202
    return str(answer.json()["instance_id"])


def test_a_deployment_that_continues_ingress_traces_shows_the_request_and_the_workers_spans_in_one_trace(
    spans, monkeypatch
):
    monkeypatch.setattr(tracing, "CONTINUE_INGRESS", True)
    caller = int(CALLER.split("-")[1], 16)
    instance_id = _post_traced("continued")
    run_until_idle()
    [ingress] = _named(spans, "POST /api/routes/continued")
    [root] = _named(spans, "instance ")
    turns, steps = _named(spans, "turn "), _named(spans, "step ")
    assert turns and {s.name for s in steps} >= {"step flaky"}
    assert {s.context.trace_id for s in [ingress, root, *turns, *steps]} == {caller}
    assert root.parent.span_id == ingress.context.span_id and root.links == ()
    assert root.context.span_id == tracing.instance_ids(instance_id)[1]
    assert {t.parent.span_id for t in turns} == {root.context.span_id}
    assert {s.parent.span_id for s in steps} <= {t.context.span_id for t in turns}
    stored = History.objects.get(instance_id=instance_id, kind="instance.created").data["traceparent"]
    assert tracing.trace_id_hex(instance_id, stored) == f"{caller:032x}"


def test_by_default_ingress_traces_are_linked_and_the_instance_keeps_its_own_trace(spans):
    assert (
        tracing.ingress_mode_by({}) == "link"
        and tracing.ingress_mode_by({"RUNLEDGER_TRACE_INGRESS": "continue"}) == "continue"
    )
    instance_id = _post_traced("linked")
    run_until_idle()
    own = int(tracing.trace_id_hex(instance_id), 16)
    assert own != int(CALLER.split("-")[1], 16)
    assert {s.context.trace_id for s in _named(spans, "step ") + _named(spans, "turn ")} == {own}
