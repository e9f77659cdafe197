"""Requests carrying a NUL character are refused before any view sees them.

PostgreSQL's text and jsonb cannot hold U+0000, so a NUL in a filter, a form field or a JSON
body would otherwise reach the database and fail there as a server error. Here it is a 400 that
names the field at fault: JSON in the API's error envelope under /api/, plain text elsewhere.
It is checked before authentication, like any malformed request: the answer says nothing about
the resource or the caller.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from django.http import HttpRequest, HttpResponse, HttpResponseBadRequest

from dashboard.api.errors import error_response

NUL = "\x00"


def _offending_field(request: HttpRequest) -> str | None:
    """The first query parameter or (url-encoded) form field whose name or value holds a NUL."""
    sources = []
    query = request.META.get("QUERY_STRING", "")
    if NUL in query or "%00" in query:
        sources.append(("query parameter", request.GET))
    if request.method == "POST" and request.content_type == "application/x-www-form-urlencoded":
        sources.append(("form field", request.POST))
    for where, data in sources:
        for key, values in data.lists():
            if NUL in key or any(NUL in value for value in values):
                shown = key.replace(NUL, "\\x00")
                return f"{where} {shown!r}"
    return None


def _json_body_has_nul(request: HttpRequest) -> bool:
    if request.method not in ("POST", "PUT", "PATCH") or "json" not in request.content_type:
        return False
    body = request.body
    if b"\x00" in body:
        return True
    if b"\\u0000" not in body:
        return False
    try:
        return _holds_nul(json.loads(body))
    except ValueError:
        return False  # not JSON: the view answers that


def _holds_nul(value: Any) -> bool:
    if isinstance(value, str):
        return NUL in value
    if isinstance(value, dict):
        return any(NUL in key or _holds_nul(item) for key, item in value.items())
    if isinstance(value, list):
        return any(_holds_nul(item) for item in value)
    return False


class RejectNulMiddleware:
    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        field = "JSON body" if _json_body_has_nul(request) else _offending_field(request)
        if field is None:
            return self.get_response(request)
        message = f"the request's {field} contains a NUL character (\\x00), which no field can hold"
        if request.path.startswith("/api/"):
            return error_response(400, "nul_character", message)
        return HttpResponseBadRequest(message, content_type="text/plain; charset=utf-8")
