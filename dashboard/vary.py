"""The console's pages answer an htmx request with a fragment and a browser's with the whole
page, at the same URL: every answer says it varies on HX-Request, so no cache — the browser's
own among them, which Back reads — hands the fragment over for the page."""

from __future__ import annotations

from collections.abc import Callable

from django.http import HttpRequest, HttpResponse
from django.utils.cache import patch_vary_headers

from dashboard.guard import answers_json


class VaryOnHtmxMiddleware:
    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        response = self.get_response(request)
        if not answers_json(request):
            patch_vary_headers(response, ("HX-Request",))
        return response
