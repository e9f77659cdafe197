"""Error pages inside the app's layout: 403, 404, 500 and a refused CSRF token.

Under /api/ and /hooks/ these never show: `dashboard.guard.ErrorEnvelopeMiddleware` turns every
error there into the JSON envelope, so these handlers hand such requests Django's defaults for
the middleware to rewrite. A 500 renders without the request's context: the database or the
session may be what failed, so the page must not touch them.
"""

from __future__ import annotations

from typing import Any

from django.http import Http404, HttpRequest, HttpResponse
from django.template import loader
from django.urls import Resolver404
from django.views import defaults
from django.views.csrf import csrf_failure as django_csrf_failure

from dashboard.guard import answers_json


def _said(exception: Any) -> str:
    """What our own code said when it refused (`Http404("no instance with that id in your
    tenants")`); nothing for Django's resolver, whose message lists the URL patterns."""
    if exception is None or isinstance(exception, Resolver404) or not exception.args:
        return ""
    said = exception.args[0]
    return said if isinstance(said, str) else ""


def _page(request: HttpRequest, status: int, context: dict[str, Any]) -> HttpResponse:
    body = loader.render_to_string(f"errors/{status}.html", {"status": status, **context}, request=request)
    return HttpResponse(body, status=status)


def page_not_found(request: HttpRequest, exception: Exception) -> HttpResponse:
    if answers_json(request):
        return defaults.page_not_found(request, exception)
    said = _said(exception) if isinstance(exception, Http404) else ""
    return _page(request, 404, {"heading": "Not found", "said": said, "path": request.path})


def permission_denied(request: HttpRequest, exception: Exception) -> HttpResponse:
    if answers_json(request):
        return defaults.permission_denied(request, exception)
    return _page(request, 403, {"heading": "Not allowed", "said": _said(exception)})


def server_error(request: HttpRequest) -> HttpResponse:
    if answers_json(request):
        return defaults.server_error(request)
    return HttpResponse(
        loader.render_to_string("errors/500.html", {"status": 500, "heading": "Server error"}), status=500
    )


def csrf_failure(request: HttpRequest, reason: str = "") -> HttpResponse:
    """CSRF_FAILURE_VIEW: a form posted from a page too old (its token expired with the session)
    or from another site. Nothing was done; going back and reloading gets a fresh token."""
    if answers_json(request):
        return django_csrf_failure(request, reason)
    return _page(request, 403, {"heading": "Form expired", "csrf": True, "said": ""})
