"""The console's one-time messages ("Redrive started…"), with their storage built only for a
request that reads or adds one.

Django's MessageMiddleware builds the storage for every request: a cookie storage with its
signer (a settings lookup and a key derivation) and a session storage, then asks it after the
view whether anything changed. The API and the webhooks never show or add a message, and under
bench/ingress.py's no-op ceiling that was the dearest of the middleware's own work. Here the
storage is built the first time the request touches it; a request that never did stores nothing,
which is what the storage's `update` does when no message was read or added.
"""

from __future__ import annotations

from django.contrib.messages.middleware import MessageMiddleware
from django.contrib.messages.storage import default_storage
from django.http import HttpRequest, HttpResponse
from django.utils.functional import SimpleLazyObject, empty


class LazyMessageMiddleware(MessageMiddleware):
    def process_request(self, request: HttpRequest) -> None:
        request._messages = SimpleLazyObject(lambda: default_storage(request))  # type: ignore[attr-defined]

    def process_response(self, request: HttpRequest, response: HttpResponse) -> HttpResponse:
        storage = getattr(request, "_messages", None)
        if isinstance(storage, SimpleLazyObject) and storage._wrapped is empty:
            return response  # never read nor added to: nothing to store
        return super().process_response(request, response)
