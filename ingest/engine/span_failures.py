"""An exception written on a span, the OpenTelemetry way (an ERROR status and an `exception`
event) but redacted: its message and traceback pass through `ingest.engine.redaction`, and a
sensitive step's are left out, its class alone named. The SDK's own recording, which would
keep the raw text, stays off on every span the engine starts; this is used instead.
"""

from __future__ import annotations

from typing import Any

from ingest.engine.redaction import redact


def failed(span: Any, exc: BaseException, *, sensitive: bool = False) -> None:
    """`exc` on `span`: an ERROR status and an `exception` event (the OpenTelemetry convention),
    their texts redacted; a sensitive step's message and traceback left out altogether."""
    import traceback

    from opentelemetry.trace import StatusCode

    name = type(exc).__name__
    if sensitive:
        span.set_status(StatusCode.ERROR, f"{name} (a sensitive step: its message is not traced)")
        span.add_event("exception", {"exception.type": name, "exception.escaped": True})
        return
    message = redact(str(exc))
    span.set_status(StatusCode.ERROR, message[:500] or name)
    span.add_event(
        "exception",
        {
            "exception.type": name,
            "exception.message": message[:2000],
            "exception.escaped": True,
            "exception.stacktrace": redact("".join(traceback.format_exception(exc)))[-8000:],
        },
    )
