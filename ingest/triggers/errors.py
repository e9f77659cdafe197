"""Trigger errors. Each carries the HTTP status and the stable code the API answers with."""

from __future__ import annotations


class TriggerError(Exception):
    """Unexpected trigger error."""

    status = 400
    code = "trigger_error"

    def __init__(self, message: str | None = None) -> None:
        super().__init__(message or self.__doc__)


class RouteNotFound(TriggerError):
    """No route has that name."""

    status = 404
    code = "route_not_found"


class RouteDisabled(TriggerError):
    """The route is disabled."""

    status = 409
    code = "route_disabled"


class RouteChanged(TriggerError):
    """The route or its credential kept changing while the request was handled."""

    status = 409
    code = "route_changed"


class NotAuthenticated(TriggerError):
    """The ingress token is missing or unknown."""

    status = 401
    code = "not_authenticated"


class BadSignature(TriggerError):
    """The request signature is missing or does not match the body."""

    status = 401
    code = "bad_signature"


class StaleTimestamp(TriggerError):
    """The request timestamp is outside the accepted window."""

    status = 401
    code = "stale_timestamp"


class InputRejected(TriggerError):
    """The request carries something no endpoint accepts (ingest/triggers/limits.py)."""

    status = 400
    code = "invalid_input"


class BodyTooLarge(InputRejected):
    """The request body is over the size limit."""

    status = 413
    code = "body_too_large"


class MalformedJson(InputRejected):
    """The request body is not valid JSON."""

    status = 400
    code = "malformed_json"


class UnsupportedMediaType(InputRejected):
    """The body's Content-Type is not one this endpoint reads."""

    status = 415
    code = "unsupported_media_type"


class NestedTooDeeply(InputRejected):
    """The JSON nests arrays and objects too deeply."""

    code = "too_deep"


class NumberTooLong(InputRejected):
    """A number has more digits than accepted."""

    code = "number_too_long"


class StringTooLong(InputRejected):
    """A string is longer than accepted."""

    code = "string_too_long"


class TooManyItems(InputRejected):
    """An array or object holds more items than accepted."""

    code = "too_many_items"


class NulCharacter(InputRejected):
    """Text contains U+0000, which PostgreSQL's text and jsonb cannot hold."""

    code = "nul_character"


class LoneSurrogate(InputRejected):
    """Text contains a lone UTF-16 surrogate, which is not a character."""

    code = "invalid_unicode"


class DateOutOfRange(InputRejected):
    """A time in a filter lies outside the range a filter can name."""

    code = "date_out_of_range"


class ReservedParam(InputRejected):
    """The params set a key the engine owns."""

    code = "reserved_param"


class ReplayedRequest(TriggerError):
    """This exact signed request was already accepted."""

    status = 409
    code = "replayed_request"

    def __init__(self, message: str | None = None, *, instance_id: str = "") -> None:
        self.instance_id = instance_id
        super().__init__(message)


class InvalidPayload(TriggerError):
    """The request body is JSON but not an object."""

    status = 400
    code = "invalid_payload"


class InvalidWait(TriggerError):
    """The wait parameter could not be understood."""

    status = 400
    code = "invalid_wait"


class IdempotencyConflict(TriggerError):
    """The idempotency key was already used with a different body."""

    status = 409
    code = "idempotency_conflict"


class InvalidIdempotencyKey(TriggerError):
    """Idempotency keys are 1 to 200 printable ASCII characters."""

    status = 400
    code = "invalid_idempotency_key"


class RateLimited(TriggerError):
    """Too many requests; retry after the given number of seconds."""

    status = 429
    code = "rate_limited"

    def __init__(self, message: str | None = None, *, retry_after: float) -> None:
        self.retry_after = retry_after
        super().__init__(message)


class InvalidCron(TriggerError):
    """The cron expression could not be understood."""

    status = 400
    code = "invalid_cron"


class InvalidTimezone(TriggerError):
    """The time zone is not an IANA name such as Europe/Paris."""

    status = 400
    code = "invalid_timezone"


class InvalidFields(TriggerError):
    """Some fields are invalid; `problems` names each one with what is wrong (`__all__`: the
    whole), so a form or an API answer shows every wrong field at once."""

    status = 400
    code = "invalid_fields"

    def __init__(self, message: str | None = None, *, problems: dict[str, str] | None = None) -> None:
        self.problems = problems or {}
        super().__init__(message or ("; ".join(f"{k}: {v}" for k, v in self.problems.items()) or None))


class InvalidSchedule(InvalidFields):
    """The schedule is invalid."""

    code = "invalid_schedule"


class ScheduleExists(InvalidFields):
    """A schedule already has that name."""

    status = 409
    code = "schedule_exists"


class ScheduleNotFound(TriggerError):
    """No schedule has that name."""

    status = 404
    code = "schedule_not_found"


class InvalidEvent(TriggerError):
    """The event is invalid."""

    status = 400
    code = "invalid_event"


class UnknownRateLimit(TriggerError):
    """No token bucket has that key; configure it first or pass its rate."""

    status = 404
    code = "unknown_rate_limit"


class InvalidCoalesce(TriggerError):
    """The coalesce (debounce or batch) setting of a route or subscription is invalid."""

    status = 400
    code = "invalid_coalesce"


class IngressSecretNotFound(TriggerError):
    """No ingress credential has that tenant and name."""

    status = 404
    code = "ingress_secret_not_found"


class SubscriptionNotFound(TriggerError):
    """No subscription has that id."""

    status = 404
    code = "subscription_not_found"


class InvalidApiToken(TriggerError):
    """The API token's name or expiry is invalid."""

    status = 400
    code = "invalid_api_token"


class ApiTokenNotFound(TriggerError):
    """No API token of this user has that id."""

    status = 404
    code = "api_token_not_found"


class InvalidRoute(InvalidFields):
    """The route's settings are invalid."""

    code = "invalid_route"


class RouteExists(InvalidFields):
    """A route already has that name."""

    status = 409
    code = "route_exists"


class InvalidSubscription(InvalidFields):
    """The subscription's settings are invalid."""

    code = "invalid_subscription"


class InvalidIngressSecret(InvalidFields):
    """The ingress credential's settings, or the rotation's, are invalid."""

    code = "invalid_ingress_secret"


class IngressSecretExists(InvalidFields):
    """The tenant already has an ingress credential of that name."""

    status = 409
    code = "ingress_secret_exists"
