"""Refusals of the connection services. They take the triggers' refusal shape (an HTTP status, a
stable code, every wrong field by name in `problems`), so the console's forms, the REST API's
error envelope and the CLI show them as they show a route's or a schedule's."""

from __future__ import annotations

from ingest.triggers.errors import InvalidFields, TriggerError


class InvalidConnection(InvalidFields):
    """The connection's settings are invalid."""

    code = "invalid_connection"


class ConnectionExists(InvalidFields):
    """The tenant already has a connection of that kind."""

    status = 409
    code = "connection_exists"


class ConnectionNotFound(TriggerError):
    """The tenant has no connection of that kind."""

    status = 404
    code = "connection_not_found"


class ConnectionChanged(TriggerError):
    """The connection changed since the page or the read that sent this request."""

    status = 409
    code = "connection_changed"
