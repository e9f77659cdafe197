"""Binds the request's W3C trace id (the `traceparent` header) to the log context for the
request, so every line logged while serving it carries `trace_id`."""

from __future__ import annotations

import re
from collections.abc import Callable

from django.http import HttpRequest, HttpResponse

from dashboard.observability import context

# version-traceid-parentid-flags; an all-zero trace id is invalid (W3C Trace Context, 3.2.2.3).
_TRACEPARENT = re.compile(r"^[0-9a-f]{2}-([0-9a-f]{32})-[0-9a-f]{16}-[0-9a-f]{2}$")


def trace_id_from(traceparent: str) -> str | None:
    match = _TRACEPARENT.match(traceparent.strip().lower())
    if match is None or match.group(1) == "0" * 32:
        return None
    return match.group(1)


class TraceContextMiddleware:
    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        trace_id = trace_id_from(request.headers.get("traceparent", ""))
        if trace_id is None:
            return self.get_response(request)
        with context.bind(trace_id=trace_id):
            return self.get_response(request)
