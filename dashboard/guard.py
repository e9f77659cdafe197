"""Malformed requests are refused at the door, before authentication and before any view.

`InputGuardMiddleware` checks what every endpoint would otherwise have to: the declared body
size (413 before the body is read), the URL path, query parameters and form fields (PostgreSQL
text holds no NUL), the Content-Type of JSON endpoints (415), and JSON bodies against the input
limits of ingest/triggers/limits.py (depth, number digits, string length and content). The
answer names what was wrong and says nothing about the resource or the caller; nothing ran, so
no row changed. Views may raise the same `InputRejected` errors (a filter out of range, a
`dashboard.query_params.BadQuery` naming every bad query parameter) and get the same answer: JSON
under /api/ and /hooks/, elsewhere a 4xx page inside the layout that lists what was wrong.

`ErrorEnvelopeMiddleware` makes every error under /api/ and /hooks/ JSON,
`{"error": {"code", "message"}}`, including the 404s, 405s and 500s that Django and
django-ninja answer in HTML or with an empty body.
"""

from __future__ import annotations

from collections.abc import Callable
from http import HTTPStatus
from typing import Any

from django.contrib.auth import get_user
from django.contrib.auth.models import AnonymousUser
from django.core.exceptions import (
    DisallowedHost,
    RequestDataTooBig,
    TooManyFieldsSent,
    TooManyFilesSent,
)
from django.http import HttpRequest, HttpResponse
from django.template import loader
from django.utils.functional import SimpleLazyObject

from dashboard.api.errors import error_response
from dashboard.query_params import BadQuery
from ingest.triggers import limits
from ingest.triggers.errors import BodyTooLarge, InputRejected, UnsupportedMediaType

JSON_PREFIXES = ("/api/", "/hooks/")
MAX_PATH_CHARS = 2048
_XML_TYPES = ("text/xml", "application/xml", "application/soap+xml")
_WITH_BODY = ("POST", "PUT", "PATCH")

Handler = Callable[[HttpRequest], HttpResponse]


def answers_json(request: HttpRequest) -> bool:
    return request.path.startswith(JSON_PREFIXES)


def rejection(request: HttpRequest, exc: InputRejected, *, session_usable: bool = True) -> HttpResponse:
    """JSON under /api/ and /hooks/; elsewhere a page inside the layout listing what was wrong
    (each bad query parameter when the view parsed several). The layout shows the user's
    navigation unless the session cookie itself was refused."""
    if answers_json(request):
        return error_response(exc.status, exc.code, str(exc))
    if not session_usable:
        request.user = AnonymousUser()
    elif not hasattr(request, "user"):  # refused at the door, before AuthenticationMiddleware
        request.user = SimpleLazyObject(lambda: get_user(request))  # type: ignore[assignment]
    problems = exc.problems if isinstance(exc, BadQuery) else (str(exc),)
    heading = "Bad request" if exc.status == 400 else HTTPStatus(exc.status).phrase
    body = loader.render_to_string(
        "errors/400.html", {"status": exc.status, "heading": heading, "problems": problems}, request=request
    )
    return HttpResponse(body, status=exc.status)


def _body_kind(path: str) -> str:
    """What the endpoint at `path` reads: "xml" (Outbound Messages), "json" (the API and the
    other hooks), or "form" (the dashboard)."""
    if path.startswith("/hooks/") and path.rstrip("/").endswith("/outbound"):
        return "xml"
    return "json" if path.startswith(JSON_PREFIXES) else "form"


def _is_json_type(content_type: str) -> bool:
    return content_type == "application/json" or (
        content_type.startswith("application/") and content_type.endswith("+json")
    )


def _check_media_type(request: HttpRequest, kind: str) -> None:
    given = request.content_type or "(none)"
    if kind == "json" and not _is_json_type(request.content_type or ""):
        raise UnsupportedMediaType(
            f"the body's Content-Type is {given}; {request.path} reads JSON — send Content-Type: application/json"
        )
    if kind == "xml" and request.content_type not in _XML_TYPES:
        raise UnsupportedMediaType(
            f"the body's Content-Type is {given}; Outbound Messages are SOAP — send Content-Type: text/xml"
        )


def _check_fields(where: str, data: Any, bounds: limits.InputLimits) -> None:
    for key, values in data.lists():
        shown = key.replace(limits.NUL, "\\x00")[:40]
        limits.text_check(key, bounds.key_chars, where=f"the {where} name {shown!r}")
        for value in values:
            limits.text_check(value, bounds.string_chars, where=f"the request's {where} {shown!r}")


def bad_cookies(request: HttpRequest, bounds: limits.InputLimits) -> list[str]:
    """Cookies no lookup can use: a quoted cookie may carry `\\000`, which Django unquotes to
    NUL, and a session key with a NUL fails in PostgreSQL, on every page."""
    bad = []
    for name, value in request.COOKIES.items():
        try:
            limits.text_check(name + value, bounds.string_chars, where="a cookie")
        except InputRejected:
            bad.append(name)
    return bad


def check_request(request: HttpRequest, bounds: limits.InputLimits) -> None:
    """Raise an InputRejected error for anything no endpoint accepts."""
    limits.text_check(request.path, MAX_PATH_CHARS, where="the URL path")
    try:
        declared = int(request.META.get("CONTENT_LENGTH") or 0)
    except ValueError:
        declared = 0
    limits.check_size(declared, limits=bounds)
    _check_fields("query parameter", request.GET, bounds)
    if request.method not in _WITH_BODY:
        return
    kind = _body_kind(request.path)
    if kind == "form":
        _check_fields("form field", request.POST, bounds)
        return
    body = request.body
    limits.check_size(len(body), limits=bounds)  # a chunked body declares no length
    if not body.strip():
        return
    _check_media_type(request, kind)
    if kind == "json":
        value = limits.json_parse(body, limits=bounds, what="the JSON body")
        setattr(request, limits.PARSED_BODY, value)


def _too_big(bounds: limits.InputLimits) -> BodyTooLarge:
    return BodyTooLarge(
        f"the body is over {bounds.body_bytes:,} bytes, the most accepted; send "
        "less, or store large data elsewhere and send its reference"
    )


class InputGuardMiddleware:
    def __init__(self, get_response: Handler) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        bounds = limits.input_limits()
        if cookies := bad_cookies(request, bounds):
            response = rejection(
                request,
                InputRejected(
                    f"the cookie {cookies[0][:40]!r} holds a NUL character, a lone surrogate or too much "
                    "text; it has been deleted — reload the page"
                ),
                session_usable=False,
            )
            for name in cookies:
                response.delete_cookie(name)
            return response
        try:
            check_request(request, bounds)
        except InputRejected as exc:
            return rejection(request, exc)
        except RequestDataTooBig:
            return rejection(request, _too_big(bounds))
        except (TooManyFieldsSent, TooManyFilesSent) as exc:
            return rejection(request, InputRejected(f"the request has too many fields ({exc})"))
        return self.get_response(request)

    def process_exception(self, request: HttpRequest, exc: Exception) -> HttpResponse | None:
        if isinstance(exc, InputRejected):
            return rejection(request, exc)
        if isinstance(exc, RequestDataTooBig):
            return rejection(request, _too_big(limits.input_limits()))
        return None


_CODES = {
    400: "bad_request",
    401: "not_authenticated",
    403: "forbidden",
    404: "not_found",
    405: "method_not_allowed",
    413: "body_too_large",
    415: "unsupported_media_type",
}


def _envelope_message(request: HttpRequest, response: HttpResponse) -> str:
    status = response.status_code
    if status == 404:
        return f"no endpoint or object at {request.path[:200]}; check the URL"
    if status == 405:
        allowed = response.get("Allow", "")
        return f"{request.method} is not allowed on {request.path[:200]}; use {allowed or 'another method'}"
    if status >= 500:
        return "an unexpected server error; it was logged — nothing is known to have changed"
    content_type = response.get("Content-Type", "")
    if content_type.startswith("text/plain") and not response.streaming:
        text = response.content.decode("utf-8", "replace").strip()
        if text:
            return text[:500]
    return HTTPStatus(status).phrase if status in HTTPStatus._value2member_map_ else "error"


class ErrorEnvelopeMiddleware:
    """Outermost for /api/ and /hooks/: an error answered in anything but JSON becomes the
    envelope, keeping its status and its Allow, Retry-After and WWW-Authenticate headers."""

    def __init__(self, get_response: Handler) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        response = self.get_response(request)
        if (
            response.status_code < 400
            or not answers_json(request)
            or response.get("Content-Type", "").startswith("application/json")
        ):
            return response
        status = response.status_code
        code = _CODES.get(status, "internal_error" if status >= 500 else "error")
        enveloped = error_response(status, code, _envelope_message(request, response))
        for header in ("Allow", "Retry-After", "WWW-Authenticate"):
            if header in response:
                enveloped[header] = response[header]
        return enveloped


def bad_request(request: HttpRequest, exception: Any) -> HttpResponse:
    """handler400: a request Django refuses before any view. What was wrong is said without
    echoing the offending value back."""
    bounds = limits.input_limits()
    if isinstance(exception, RequestDataTooBig):
        return rejection(request, _too_big(bounds))
    if isinstance(exception, (TooManyFieldsSent, TooManyFilesSent)):
        return rejection(request, InputRejected("the request has more fields than accepted"))
    if answers_json(request):
        told = (
            "the Host header names a host this server does not answer for (ALLOWED_HOSTS)"
            if isinstance(exception, DisallowedHost)
            else "the request is malformed"
        )
        return error_response(400, "bad_request", f"{told}; nothing was done")
    return rejection(request, InputRejected("the request is malformed; nothing was done"))
