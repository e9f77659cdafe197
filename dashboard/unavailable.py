"""A database that cannot answer (gone, timing out, full, read-only) is a 503, not a 500.

A view whose query fails on the database itself raises Django's OperationalError (the server
is gone, a statement timed out, the disk is full) or InterfaceError (the connection is closed).
Neither is a bug of the view nor the caller's fault: the answer is 503 with Retry-After, a
short page for people, and the API's error envelope under /api/ and the hooks, for programs.
The server's own words go to the log, not to the caller. The page is plain HTML built here:
rendering a template would run context processors, which read the session from the database
that just failed.

Django's persistent connections check their health at each request (CONN_HEALTH_CHECKS in
dashboard/config.py), so once the database is back the next request works. A web process's pool
checks a connection that has not served a request in the last 0.5 s (dashboard/db_pool.py): a
connection the server dropped within that window fails the one request that gets it, and the
pool discards it.
"""

from __future__ import annotations

import logging

from django.db import InterfaceError, OperationalError
from django.http import HttpRequest, HttpResponse
from django.utils.deprecation import MiddlewareMixin

from dashboard.api.errors import error_response

log = logging.getLogger("runledger.web")

RETRY_AFTER_SECONDS = 5
MESSAGE = "The database is not answering right now; nothing was changed. Try again in a few seconds."
JSON_PREFIXES = ("/api/", "/hooks/")

PAGE = f"""<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>Runledger: database unavailable</title>
<meta name="viewport" content="width=device-width, initial-scale=1"></head>
<body style="font-family: system-ui, sans-serif; max-width: 40rem; margin: 4rem auto; padding: 0 1rem">
<h1>The database is not answering</h1>
<p>{MESSAGE}</p>
<p>Workflows already running carry on once it is back.</p>
</body></html>
"""


class DatabaseUnavailableMiddleware(MiddlewareMixin):
    """Answers 503 for a view that failed on the database; any other error is left to Django.
    (MiddlewareMixin: sync and async, so daphne's requests stay async through it.)"""

    def process_exception(self, request: HttpRequest, exception: Exception) -> HttpResponse | None:
        if not isinstance(exception, OperationalError | InterfaceError):
            return None
        log.warning(
            "%s %s: the database failed (%s: %s); answered 503",
            request.method,
            request.path,
            type(exception).__name__,
            str(exception).strip().splitlines()[0] if str(exception) else "",
        )
        if request.path.startswith(JSON_PREFIXES):
            response: HttpResponse = error_response(503, "database_unavailable", MESSAGE)
        else:
            response = HttpResponse(PAGE, status=503, content_type="text/html; charset=utf-8")
        response["Retry-After"] = str(RETRY_AFTER_SECONDS)
        return response
