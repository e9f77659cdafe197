"""Ingress request counts: counted in each web process's memory, added to `IngressTally`.

The ledger does not record refused or failed ingress requests (a 401 or a 429 writes no row),
so these are counted where they are answered. Each process adds its counts to the shared table
every FLUSH_SECONDS (and before it answers a scrape), so a scrape of any web process sees every
process's counts, at most FLUSH_SECONDS late; a process killed loses its last unflushed seconds.
"""

from __future__ import annotations

import functools
import logging
import re
import threading
import time
from collections.abc import Callable

from django.db import DatabaseError, IntegrityError, InterfaceError, OperationalError, transaction
from django.db.models import F
from django.http import HttpRequest, HttpResponse

from dashboard.observability.models import IngressTally

log = logging.getLogger("runledger.observability")

FLUSH_SECONDS = 5.0
MAX_KEYS = 500  # distinct (route, status) pairs one process keeps between flushes
ROUTE_MAX = 100  # a route's name is a slug of at most 100 characters
# A route's name is a slug; anything else in its place (a NUL, a space, 300 characters) names no
# route and is counted as INVALID: a label must fit the table (PostgreSQL text refuses NUL) and a
# caller must not be able to mint labels.
_SLUG = re.compile(rf"[-a-zA-Z0-9_]{{1,{ROUTE_MAX}}}")
INVALID = "invalid"


@functools.cache
def hook_labels() -> frozenset[str]:
    """`hooks/<source>` for each source /hooks/ serves (ingest/urls.py): the only hook labels.
    A path under /hooks/ naming another source is a 404 and no label: probes of made-up sources
    would otherwise each add a series and a stored row."""
    from ingest.urls import urlpatterns

    return frozenset(f"hooks/{str(p.pattern).split('/')[0]}" for p in urlpatterns)


def ingress_route(path: str) -> str | None:
    """The route label of an ingress path, or None for any other path: `/api/routes/<name>` is
    `<name>` (a name that cannot be a route's is `invalid`), `/hooks/<source>/...` is
    `hooks/<source>` for a source /hooks/ serves (its key is a secret, never a label)."""
    parts = path.split("/")
    if path.startswith("/api/routes/") and len(parts) >= 4 and parts[3]:
        return parts[3] if _SLUG.fullmatch(parts[3]) else INVALID
    if path.startswith("/hooks/") and len(parts) >= 3:
        label = f"hooks/{parts[2]}"
        return label if label in hook_labels() else None
    return None


class Counts:
    """This process's counts since its last flush."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._counts: dict[tuple[str, int], int] = {}
        self._flushed_at = time.monotonic()

    def add(self, route: str, status: int) -> None:
        with self._lock:
            key = (route, status)
            if key not in self._counts and len(self._counts) >= MAX_KEYS:
                key = ("unknown", status)
            self._counts[key] = self._counts.get(key, 0) + 1

    def discard(self) -> None:
        """Forget the counts not flushed yet (tests start from none)."""
        with self._lock:
            self._counts.clear()

    def due(self) -> bool:
        return time.monotonic() - self._flushed_at >= FLUSH_SECONDS

    def flush(self) -> None:
        """Add the counts to the table. When the database is away they are kept for the next
        flush; a count the table refuses (it never should: labels are checked) is dropped, so
        it cannot block every later flush. Each row is its own savepoint: a refused write never
        breaks the transaction of the request that flushes."""
        with self._lock:
            counts, self._counts = self._counts, {}
            self._flushed_at = time.monotonic()
        kept: dict[tuple[str, int], int] = {}
        for (route, status), n in sorted(counts.items()):
            try:
                with transaction.atomic():
                    _add(route, status, n)
            except (OperationalError, InterfaceError):
                kept[(route, status)] = n
            except DatabaseError:
                log.warning(
                    "ingress count for route %r status %s refused by the database; dropped",
                    route[:40],
                    status,
                    exc_info=True,
                )
        if kept:
            log.warning("ingress counts could not be stored (%d series); keeping them for the next flush", len(kept))
            with self._lock:
                for key, n in kept.items():
                    self._counts[key] = self._counts.get(key, 0) + n


def _add(route: str, status: int, n: int) -> None:
    if IngressTally.objects.filter(route=route, status=status).update(n=F("n") + n):
        return
    try:
        with transaction.atomic():
            IngressTally.objects.create(route=route, status=status, n=n)
    except IntegrityError:  # another process created the row first
        IngressTally.objects.filter(route=route, status=status).update(n=F("n") + n)


counts = Counts()


class IngressCountMiddleware:
    """Counts every response to an ingress path, whatever answered it (view, auth, rate limit)."""

    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        response = self.get_response(request)
        route = ingress_route(request.path)
        if route is not None:
            counts.add(route, response.status_code)
            if counts.due():
                counts.flush()
        return response
