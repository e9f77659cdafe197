"""The error base shared by every outside-system client.

Each client module derives its own hierarchy from `SourceError` (GongError,
SalesforceError, LLMError, EmbeddingError). The attributes are the contract with the
engine and the workflows:

- `retryable`: a later attempt can succeed (rate limit, 5xx, network, blank LLM output);
  False means retrying cannot help (bad credentials, malformed query) and the step should
  raise `NonRetryableError`.
- `retry_after`: the minimum number of seconds to wait before the next attempt, when the
  outside system said so; the engine reads this attribute as a minimum retry delay.
"""

from __future__ import annotations


class SourceError(Exception):
    """An outside system returned an unexpected answer."""

    retryable: bool = False

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
        # Keeps the attributes when the error crosses a process boundary (pickling).
        return (
            _rebuild,
            (type(self), str(self), self.retryable, self.retry_after, self.status),
        )


def _rebuild(
    cls: type[SourceError],
    message: str,
    retryable: bool,
    retry_after: float | None,
    status: int | None,
) -> SourceError:
    error = cls.__new__(cls)
    Exception.__init__(error, message)
    error.retryable = retryable
    error.retry_after = retry_after
    error.status = status
    return error
