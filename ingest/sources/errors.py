"""The error base shared by every outside-system client, and the kinds of failure they share.

Each client module derives its own hierarchy from `SourceError` (GongError,
SalesforceError, LLMError, EmbeddingError). The attributes are the contract with the
engine and the workflows:

- `retryable`: a later attempt can succeed (rate limit, 5xx, network, blank LLM output);
  False means retrying cannot help (bad credentials, malformed query) and the step should
  raise `NonRetryableError`.
- `retry_after`: the minimum number of seconds to wait before the next attempt, when the
  outside system said so; the engine reads this attribute as a minimum retry delay.
- `needs_operator`: only a person can fix it (top up the balance, renew the plan): a workflow
  pauses for an operator instead of retrying or failing.
- `rate_limited`: the system refused because we asked too often, not because it is failing (a
  circuit breaker does not count it as an outage).

A client's classes also derive from one of the kinds below (`class GongRateLimited(GongError,
errors.RateLimited)`), which carry the kind's flags, so `except errors.RateLimited` catches a
rate limit of any source.
"""

from __future__ import annotations

from typing import Any, TypedDict


class SourceErrorOptions(TypedDict, total=False):
    """The keyword arguments `SourceError` takes, for a subclass that adds its own."""

    retryable: bool | None
    retry_after: float | None
    status: int | None


class SourceError(Exception):
    """An outside system returned an unexpected answer."""

    retryable: bool = False
    needs_operator: bool = False
    rate_limited: bool = False

    def __init__(
        self,
        message: str | None = None,
        *,
        retryable: bool | None = None,
        retry_after: float | None = None,
        status: int | None = None,
    ) -> None:
        super().__init__(message or self.__doc__)
        if retryable is not None:
            self.retryable = retryable
        self.retry_after = retry_after
        self.status = status

    def __reduce__(self) -> tuple[object, ...]:
        # Keeps every attribute, a subclass's own included (a code, a cost), when the error
        # crosses a process boundary (pickling), without calling a subclass's constructor.
        return (_rebuild, (type(self), str(self), dict(vars(self))))


def _rebuild(cls: type[SourceError], message: str, state: dict[str, Any]) -> SourceError:
    error = cls.__new__(cls)
    Exception.__init__(error, message)
    error.__dict__.update(state)
    return error


class RateLimited(SourceError):
    """The outside system is rate limiting us; retry after `retry_after` seconds."""

    retryable = True
    rate_limited = True


class ServerError(SourceError):
    """The outside system failed (5xx); retry later."""

    retryable = True


class Unavailable(SourceError):
    """The outside system could not be reached or did not answer in time; retry later."""

    retryable = True


class AuthError(SourceError):
    """The outside system refused our credentials; fix them."""


class RequestRejected(SourceError):
    """The outside system rejected the request as invalid; fix it, do not retry."""


class PaymentRequired(SourceError):
    """The outside system refused to serve the account (balance, plan); an operator must act."""

    needs_operator = True
