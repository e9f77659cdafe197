"""The console's one-time messages are stored and shown as Django's middleware does, and a
request that never touches them (the API, the webhooks) builds no storage (dashboard/flash.py)."""

from __future__ import annotations

import pytest
from django.conf import settings
from django.contrib import messages
from django.contrib.messages.storage.fallback import FallbackStorage
from django.contrib.sessions.backends.signed_cookies import SessionStore
from django.http import HttpRequest, HttpResponse
from django.test import RequestFactory
from django.utils.functional import empty

from dashboard.flash import LazyMessageMiddleware

pytestmark = pytest.mark.pure


def _request(path: str, cookies: dict[str, str] | None = None) -> HttpRequest:
    request = RequestFactory().get(path)
    request.COOKIES.update(cookies or {})
    request.session = SessionStore()
    return request


def test_it_stands_where_djangos_message_middleware_stood():
    assert "dashboard.flash.LazyMessageMiddleware" in settings.MIDDLEWARE
    assert "django.contrib.messages.middleware.MessageMiddleware" not in settings.MIDDLEWARE


def test_a_request_that_never_touches_messages_builds_no_storage_and_sets_no_cookie():
    request = _request("/api/instances")
    response = LazyMessageMiddleware(lambda r: HttpResponse("{}"))(request)
    assert request._messages._wrapped is empty
    assert "messages" not in response.cookies


def test_a_message_added_in_one_request_is_shown_by_the_next_and_then_gone():
    def add(request: HttpRequest) -> HttpResponse:
        messages.success(request, "Redrive started: 3 instance(s) queued.")
        return HttpResponse(status=302)

    first = LazyMessageMiddleware(add)(_request("/dead-letters/"))
    cookie = first.cookies["messages"].value
    assert cookie

    shown: list[str] = []

    def read(request: HttpRequest) -> HttpResponse:
        assert isinstance(request._messages, FallbackStorage)
        shown.extend(str(m) for m in messages.get_messages(request))
        return HttpResponse("page")

    second = LazyMessageMiddleware(read)(_request("/dead-letters/", {"messages": cookie}))
    assert shown == ["Redrive started: 3 instance(s) queued."]
    assert second.cookies["messages"].value == ""  # read once: the cookie is deleted
