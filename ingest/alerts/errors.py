"""Errors of the alerts package: one base class, one subclass per condition."""

from __future__ import annotations


class AlertError(Exception):
    """Unexpected alerts error."""

    code = "alert_error"
    status = 400

    def __init__(self, message: str | None = None) -> None:
        super().__init__(message or self.__doc__)


class InvalidRule(AlertError):
    """The alert rule is invalid."""

    code = "invalid_rule"
    status = 422


class InvalidChannel(AlertError):
    """The notification channel is invalid."""

    code = "invalid_channel"
    status = 422


class InvalidCallback(AlertError):
    """The callback URL is invalid."""

    code = "invalid_callback"
    status = 422


class NameTaken(AlertError):
    """The tenant already has a rule or channel of that name."""

    code = "name_taken"
    status = 409


class CallbackConflict(InvalidCallback):
    """The callback cannot be set now: the tenant has no secret to sign it, or it was sent."""

    code = "callback_conflict"
    status = 409


class RuleNotFound(AlertError):
    """No such alert rule in this tenant."""

    code = "rule_not_found"
    status = 404


class ChannelNotFound(AlertError):
    """No such notification channel in this tenant."""

    code = "channel_not_found"
    status = 404
