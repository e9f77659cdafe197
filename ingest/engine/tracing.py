"""OpenTelemetry traces of instances: a trace per instance, a span per worker turn and per step
attempt, outbound HTTP calls as their children, a link to the ingress request that started it.

Off by default, and then free: `ENABLED` is decided once, at import, from the standard OTEL_*
variables (an OTLP endpoint, or OTEL_TRACES_EXPORTER other than "none"; OTEL_SDK_DISABLED=true
wins), and every hook in the engine is `if tracing.ENABLED:` around the code as it was. The
SDK is imported only when tracing is on. The exporter is the OTLP one (HTTP/protobuf), reading
its endpoint, headers and timeout from OTEL_EXPORTER_OTLP_*, and the resource from
OTEL_SERVICE_NAME / OTEL_RESOURCE_ATTRIBUTES, as every OpenTelemetry SDK does.

A trace per instance across processes and days without storing anything: the trace id and the
root span id are derived from the instance id (SHA-256), so every turn of an instance, on any
worker, is a child of the same root. The root span itself is written when the instance ends,
with that id, from its creation to its end. A child instance's root links to its parent's; the
ingress request's `traceparent` is kept in the instance's `instance.created` history row, and
the root and each turn link to it (a link, not a parent: the request ended long before).

No span carries a secret: every text a span takes from a failure or a URL passes through
`ingest.engine.redaction` (`failed`, `client_span`), exceptions are recorded by `failed` rather
than by the SDK (whose event would hold the raw message and traceback), and a `sensitive=True`
step's failure is traced by its class alone.

A deployment that wants one trace from the caller's request to the worker's steps sets
RUNLEDGER_TRACE_INGRESS=continue: an instance started by an ingress request with a traceparent
then belongs to the caller's trace (the trace id is the caller's, the root span a child of the
ingress request's span, its span id still derived from the instance id), and its turns and step
attempts are spans of that trace. An instance without one keeps its own derived trace.

`failed`, an exception on a span redacted, is in `ingest.engine.span_failures` (imported
here). The ids (a traceparent validated, an instance's derived ids, the id generator that presets a
root span's) are in `ingest.engine.trace_ids`; `instance_ids` and `valid_traceparent` are
imported here too, so `tracing.instance_ids(...)` still reads as it did.
"""

from __future__ import annotations

import contextlib
import contextvars
import os
import threading
from collections.abc import Awaitable, Callable, Iterator, Mapping
from datetime import datetime
from typing import Any, TypeVar

from ingest.engine.redaction import redact
from ingest.engine.span_failures import failed
from ingest.engine.trace_ids import id_generator, instance_ids, next_ids, valid_traceparent

T = TypeVar("T")


def enabled_by(env: Mapping[str, str]) -> bool:
    """Whether the OTEL_* variables ask for traces (pure; tests pass their own mapping)."""
    if env.get("OTEL_SDK_DISABLED", "").strip().lower() == "true":
        return False
    exporter = env.get("OTEL_TRACES_EXPORTER", "").strip().lower()
    if exporter:
        return exporter != "none"
    return bool(env.get("OTEL_EXPORTER_OTLP_ENDPOINT") or env.get("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"))


#: Checked by every hook; decided once per process. `enable()` turns it on for tests and benches.
ENABLED: bool = enabled_by(os.environ)
INGRESS_MODES = ("link", "continue")


def ingress_mode_by(env: Mapping[str, str]) -> str:
    """RUNLEDGER_TRACE_INGRESS: `link` (default) or `continue`; anything else is `link` here (the
    settings refuse it at start, naming the variable)."""
    mode = env.get("RUNLEDGER_TRACE_INGRESS", "").strip().lower() or "link"
    return mode if mode in INGRESS_MODES else "link"


#: An ingress traceparent is continued (the instance joins the caller's trace) rather than linked.
CONTINUE_INGRESS: bool = ingress_mode_by(os.environ) == "continue"


def is_enabled() -> bool:
    """Whether instances are traced now. Code outside the engine asks this rather than reading
    `ENABLED`: `enable()`/`disable()` flip the module's switch, which a copy would not follow."""
    return ENABLED


def continues_ingress() -> bool:
    """Whether an ingress request's traceparent is continued rather than linked (`CONTINUE_INGRESS`)."""
    return CONTINUE_INGRESS


#: The `traceparent` of the request creating instances in this context (ingress sets it).
incoming: contextvars.ContextVar[str | None] = contextvars.ContextVar("runledger_incoming_traceparent", default=None)

_provider: Any = None
_tracer: Any = None
_lock = threading.Lock()
# The caller's trace id of each instance whose turn runs now in a continued trace: a parallel
# group's helper thread has no current span and finds its step's trace here.
_continued: dict[str, int] = {}


def trace_id_hex(instance_id: str, ingress: str | None = None) -> str:
    """The instance's trace id as backends show it (32 hex digits): the caller's when its
    ingress traceparent `ingress` is continued, else the one derived from its id."""
    caller = continued_from(ingress)
    return f"{caller[0] if caller else instance_ids(instance_id)[0]:032x}"


def continued_from(ingress: str | None) -> tuple[int, int, int] | None:
    """(trace id, span id, flags) of the ingress traceparent an instance continues, or None when
    it keeps its own trace (ingress traces linked, or no valid traceparent)."""
    tp = valid_traceparent(ingress) if CONTINUE_INGRESS else None
    if tp is None:
        return None
    _, trace_id, span_id, flags = tp.split("-")
    return int(trace_id, 16), int(span_id, 16), int(flags, 16)


def enable(provider: Any = None) -> Any:
    """Turn tracing on in this process with `provider` (a TracerProvider; default: the OTLP
    exporter configured from OTEL_*). Returns the provider."""
    global ENABLED, _provider, _tracer
    with _lock:
        if provider is not None:
            provider.id_generator = id_generator()  # the tracer takes it from the provider
        _provider = provider if provider is not None else _default_provider()
        _tracer = _provider.get_tracer("runledger")
        ENABLED = True
    return _provider


def disable() -> None:
    global ENABLED, _provider, _tracer
    ENABLED, _provider, _tracer = False, None, None


def _default_provider() -> Any:
    from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
    from opentelemetry.sdk.resources import Resource
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import BatchSpanProcessor, ConsoleSpanExporter

    provider = TracerProvider(
        resource=Resource.create({"service.name": os.environ.get("OTEL_SERVICE_NAME", "runledger")}),
        id_generator=id_generator(),
    )
    console = os.environ.get("OTEL_TRACES_EXPORTER", "").strip().lower() == "console"
    provider.add_span_processor(BatchSpanProcessor(ConsoleSpanExporter() if console else OTLPSpanExporter()))
    return provider


def tracer() -> Any:
    if _tracer is None:  # ENABLED from the environment: the provider is made on first use
        enable()
    return _tracer


def _link(traceparent: str | None) -> list[Any]:
    from opentelemetry.trace import Link, SpanContext, TraceFlags

    tp = valid_traceparent(traceparent)
    if tp is None:
        return []
    _, trace_id, span_id, flags = tp.split("-")
    return [
        Link(
            SpanContext(int(trace_id, 16), int(span_id, 16), is_remote=True, trace_flags=TraceFlags(int(flags, 16))),
            {"runledger.link": "ingress"},
        )
    ]


def _instance_context(instance_id: str, trace_id: int | None = None) -> Any:
    """The instance's root span as a parent, in its own trace or in `trace_id` (continued)."""
    from opentelemetry import trace
    from opentelemetry.trace import NonRecordingSpan, SpanContext, TraceFlags

    own_trace, span_id = instance_ids(instance_id)
    trace_id = trace_id or _continued.get(instance_id) or own_trace
    parent = SpanContext(trace_id, span_id, is_remote=True, trace_flags=TraceFlags(TraceFlags.SAMPLED))
    return trace.set_span_in_context(NonRecordingSpan(parent))


def _parent_link(parent_id: str | None) -> list[Any]:
    from opentelemetry.trace import Link, SpanContext, TraceFlags

    if not parent_id:
        return []
    trace_id, span_id = instance_ids(parent_id)
    return [
        Link(
            SpanContext(trace_id, span_id, is_remote=True, trace_flags=TraceFlags(TraceFlags.SAMPLED)),
            {"runledger.link": "parent-instance", "runledger.parent_id": parent_id},
        )
    ]


def instance_attributes(instance: Any) -> dict[str, Any]:
    return {
        "runledger.instance_id": instance.id,
        "runledger.workflow": instance.workflow,
        "runledger.tenant": instance.tenant,
    }


def traced_turn(instance: Any, *, worker: str, ingress: str | None, run: Callable[[], str]) -> str:
    """A worker turn as a span under the instance's root; the root span itself once it ended."""
    from opentelemetry.trace import SpanKind, StatusCode

    caller = continued_from(ingress)
    links = ([] if caller else _link(ingress)) + _parent_link(instance.parent_id)
    attributes = {
        **instance_attributes(instance),
        "runledger.worker": worker,
        "runledger.run_count": int(instance.run_count or 0),
    }
    if caller:
        _continued[instance.id] = caller[0]
    try:
        with tracer().start_as_current_span(
            f"turn {instance.workflow}",
            context=_instance_context(instance.id),
            kind=SpanKind.CONSUMER,
            links=links,
            attributes=attributes,
            record_exception=False,
            set_status_on_exception=False,
        ) as span:
            try:
                status = run()
            except BaseException as exc:
                failed(span, exc)
                raise
            span.set_attribute("runledger.outcome", status)
            if status == "errored":
                span.set_status(StatusCode.ERROR, f"instance {instance.id} errored")
    finally:
        _continued.pop(instance.id, None)
    if status in ("complete", "errored", "terminated", "completed_with_errors"):
        _root_span(instance, status=status, links=links, caller=caller)
    return status


def _root_span(instance: Any, *, status: str, links: list[Any], caller: tuple[int, int, int] | None) -> None:
    from opentelemetry import trace
    from opentelemetry.context import Context
    from opentelemetry.trace import NonRecordingSpan, SpanContext, StatusCode, TraceFlags

    trace_id, span_id = instance_ids(instance.id)
    if caller:  # a child of the ingress request's span: the SDK takes the trace id from it
        ingress = SpanContext(caller[0], caller[1], is_remote=True, trace_flags=TraceFlags(caller[2]))
        parent = trace.set_span_in_context(NonRecordingSpan(ingress))
        next_ids.span = span_id
    else:
        parent = Context()
        next_ids.trace, next_ids.span = trace_id, span_id
    started = _ns(instance.created_at)
    span = tracer().start_span(
        f"instance {instance.workflow}",
        context=parent,
        links=links,
        start_time=started,
        attributes={**instance_attributes(instance), "runledger.outcome": status},
    )
    next_ids.trace = next_ids.span = None
    if status == "errored":
        span.set_status(StatusCode.ERROR, f"instance {instance.id} errored")
    span.end()


def _ns(when: datetime | None) -> int | None:
    return None if when is None else int(when.timestamp() * 1_000_000_000)


def step_attempt(ctx: Any, run: Callable[[], T], *, sensitive: bool = False) -> T:
    """A step attempt as a span under the current turn (or, in a parallel group's helper thread,
    under the instance's root): attributes workflow, step, attempt, tenant, outcome and the cost
    the attempt recorded. A `sensitive` step's failure is traced by its class, not its message."""
    from opentelemetry import trace

    current = trace.get_current_span()
    parent = None if current.get_span_context().is_valid else _instance_context(ctx.instance_id)
    with _attempt_span(ctx, parent, sensitive=sensitive):
        return run()


async def step_attempt_async(ctx: Any, run: Callable[[], Awaitable[T]], *, sensitive: bool = False) -> T:
    """`step_attempt` for a coroutine step of an async workflow."""
    with _attempt_span(ctx, _instance_context(ctx.instance_id), sensitive=sensitive):
        return await run()


@contextlib.contextmanager
def _attempt_span(ctx: Any, parent: Any, *, sensitive: bool) -> Iterator[None]:
    """The span of one step attempt under `parent` (None: the current span); its outcome is "ok"
    or the class of the exception that ended it (re-raised, recorded by `failed`)."""
    attributes = {
        "runledger.instance_id": ctx.instance_id,
        "runledger.workflow": ctx.workflow,
        "runledger.tenant": ctx.tenant,
        "runledger.step": ctx.name,
        "runledger.attempt": ctx.attempt,
    }
    with tracer().start_as_current_span(
        f"step {ctx.name}", context=parent, attributes=attributes, record_exception=False, set_status_on_exception=False
    ) as span:
        try:
            yield
        except BaseException as exc:
            span.set_attribute("runledger.outcome", type(exc).__name__)
            failed(span, exc, sensitive=sensitive)
            raise
        span.set_attribute("runledger.outcome", "ok")


def cost_tracked(amount: Any) -> None:
    """Add a recorded cost (USD) to the current step attempt's span."""
    from opentelemetry import trace

    span = trace.get_current_span()
    if span.is_recording():
        before = getattr(span, "attributes", {}).get("runledger.cost_usd", 0.0)
        span.set_attribute("runledger.cost_usd", round(float(before) + float(amount), 6))


@contextlib.contextmanager
def client_span(method: str, url: str) -> Iterator[tuple[Any, dict[str, str]]]:
    """An outbound HTTP call as a CLIENT span; yields (span, headers to send: traceparent). The URL
    is kept without its query and redacted (a user:password, a webhook key in the path); an
    exception the call raises is recorded redacted (a connection error quotes the full URL)."""
    from urllib.parse import urlsplit

    from opentelemetry import propagate
    from opentelemetry.trace import SpanKind

    parts = urlsplit(url)
    attributes = {
        "http.request.method": method,
        "server.address": parts.hostname or "",
        "url.full": redact(f"{parts.scheme}://{parts.netloc}{parts.path}"),
    }
    with tracer().start_as_current_span(
        f"{method} {parts.hostname}",
        kind=SpanKind.CLIENT,
        attributes=attributes,
        record_exception=False,
        set_status_on_exception=False,
    ) as span:
        carrier: dict[str, str] = {}
        propagate.inject(carrier)
        try:
            yield span, carrier
        except BaseException as exc:
            failed(span, exc)
            raise


@contextlib.contextmanager
def ingress_request(route: str, traceparent: str | None) -> Iterator[None]:
    """Around an ingress request: with tracing on, a SERVER span child of the caller's
    traceparent, whose own traceparent the instances it creates keep; off, the caller's header
    is kept as it came (validated), so turning tracing on later still links them."""
    if not ENABLED:
        token = incoming.set(valid_traceparent(traceparent))
        try:
            yield
        finally:
            incoming.reset(token)
        return
    from opentelemetry import propagate
    from opentelemetry.trace import SpanKind

    parent = propagate.extract({"traceparent": traceparent} if valid_traceparent(traceparent) else {})
    with tracer().start_as_current_span(
        f"POST /api/routes/{route}",
        context=parent,
        kind=SpanKind.SERVER,
        attributes={"http.route": "/api/routes/{route}", "runledger.route": route},
        record_exception=False,
        set_status_on_exception=False,
    ) as span:
        sc = span.get_span_context()
        token = incoming.set(f"00-{sc.trace_id:032x}-{sc.span_id:016x}-{int(sc.trace_flags):02x}")
        try:
            yield
        except BaseException as exc:
            failed(span, exc)
            raise
        finally:
            incoming.reset(token)
