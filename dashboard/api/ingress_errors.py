"""Counts signed ingress's 5xx answers for the "ingress 5xx rate" alert: a 5xx (or an exception
Django turns into one) is recorded with its route; a 2xx–4xx costs nothing."""

from __future__ import annotations

import logging
from collections.abc import Callable
from functools import wraps

from django.http import HttpRequest, HttpResponse
from django.utils import timezone

from ingest.alerts.services import ingress_error_record

log = logging.getLogger("runledger.alerts")
View = Callable[[HttpRequest, str], HttpResponse]


def _record(route: str, status: int) -> None:
    try:
        ingress_error_record(route=route, status=status, now=timezone.now())
    except Exception:  # the answer goes out whatever happens to its tally (the database may be why)
        log.exception("could not record ingress %s on route %s", status, route)


def counting_5xx(view: View) -> View:
    @wraps(view)
    def wrapped(request: HttpRequest, route: str) -> HttpResponse:
        try:
            response = view(request, route)
        except Exception:
            _record(route, 500)
            raise
        if response.status_code >= 500:
            _record(route, response.status_code)
        return response

    return wrapped
