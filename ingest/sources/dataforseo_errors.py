"""DataForSEO's errors and the pure mapping of its status codes onto them.

DataForSEO answers HTTP 200 to almost everything; the outcome is in `status_code`, once for the
request and once per task (`tasks[].status_code`), five digits whose first three name a class:
200xx done, 401xx search-engine side, 402xx the account (balance, plan, per-minute limits),
403xx-405xx the request, 500xx DataForSEO itself. Only 401, 402, 404 and 500 come as HTTP
statuses (and 429 in front of the API when a client floods it).
"""

from __future__ import annotations

from decimal import Decimal
from typing import Unpack

from ingest.sources import errors
from ingest.sources.errors import SourceError, SourceErrorOptions

__all__ = [
    "DataForSEOAuthError", "DataForSEOError", "DataForSEONoResults", "DataForSEOPaymentRequired",
    "DataForSEORateLimited", "DataForSEORequestRejected", "DataForSEOServerError",
    "DataForSEOTooManyTargets", "DataForSEOUnavailable", "error_class_for_status",
]  # fmt: skip


class DataForSEOError(SourceError):
    """DataForSEO returned an unexpected answer."""

    def __init__(
        self,
        message: str | None = None,
        *,
        code: int | None = None,
        cost: Decimal | None = None,
        **options: Unpack[SourceErrorOptions],
    ) -> None:
        super().__init__(message, **options)
        self.code = code  # DataForSEO's five-digit status_code, when the answer had one
        self.cost = cost  # what the failed task was billed, when DataForSEO reported it


class DataForSEOAuthError(DataForSEOError, errors.AuthError):
    """DataForSEO refused the login (401); fix the API login and password."""


class DataForSEOPaymentRequired(DataForSEOError, errors.PaymentRequired):
    """DataForSEO refused to bill the account (402xx); an operator must top up or renew it."""


class DataForSEORateLimited(DataForSEOError, errors.RateLimited):
    """DataForSEO is rate limiting this account; retry after `retry_after` seconds."""


class DataForSEOServerError(DataForSEOError, errors.ServerError):
    """DataForSEO or the search engine behind it failed (500, 500xx, 40101); retry later."""


class DataForSEOUnavailable(DataForSEOError, errors.Unavailable):
    """DataForSEO could not be reached or did not answer in time; retry later."""


class DataForSEORequestRejected(DataForSEOError, errors.RequestRejected):
    """DataForSEO rejected the request (404, 400xx, 403xx-405xx); fix it, do not retry."""


class DataForSEOTooManyTargets(DataForSEORequestRejected):
    """More targets than one DataForSEO task accepts; split them into batches."""


class DataForSEONoResults(DataForSEOError):
    """The search engine has no results for this task (40102); not an error for listings."""


# Codes whose meaning differs from their class's.
_KNOWN: dict[int, type[DataForSEOError]] = {
    40100: DataForSEOAuthError,  # "You are not authorized to access this resource."
    40101: DataForSEOServerError,  # "Internal SE Server Error." (retried by DataForSEO, billed)
    40102: DataForSEONoResults,  # "No Search Results."
    40202: DataForSEORateLimited,  # "Rate-limit per minute exceeded."
    40209: DataForSEORateLimited,  # "Your requests are sent too frequently."
}
_BY_CLASS: dict[int, type[DataForSEOError]] = {
    400: DataForSEORequestRejected,  # one task at a time, task ids
    401: DataForSEOServerError,  # the search engine's side
    402: DataForSEOPaymentRequired,  # balance, suspended account, plan or subscription
    403: DataForSEORequestRejected,
    404: DataForSEORequestRejected,  # not found, invalid path
    405: DataForSEORequestRejected,  # invalid field, invalid POST data
    500: DataForSEOServerError,  # internal error, timeouts
    501: DataForSEOServerError,
    502: DataForSEOServerError,
    503: DataForSEOServerError,
}
# How long to wait on a rate-limit code that comes without a Retry-After header.
RATE_LIMIT_WAIT = {40202: 60.0, 40209: 5.0}


def error_class_for_status(code: int) -> type[DataForSEOError] | None:
    """The error a five-digit status_code stands for; None for success (20000, 20100)."""
    if 20000 <= code < 30000:
        return None
    if code in _KNOWN:
        return _KNOWN[code]
    found = _BY_CLASS.get(code // 100)
    if found is not None:
        return found
    return DataForSEOServerError if code >= 50000 else DataForSEORequestRejected
