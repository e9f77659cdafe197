"""Logging: human-readable lines by default, JSON lines with RUNLEDGER_LOG_FORMAT=json.

python-json-logger rather than structlog: every module here already logs through the standard
library (`logging.getLogger("runledger.engine")` with %-style messages), and so do Django and
daphne. python-json-logger is only a `logging.Formatter`, so the same records become JSON with
no change to any call site; structlog would have wanted its own logger API at each of them (or a
bridge formatter doing what this one does).

Imported by settings, so it imports nothing of Django's or ours that needs settings.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from datetime import UTC, datetime
from typing import Any

from pythonjsonlogger.json import JsonFormatter as _JsonFormatter

from dashboard.observability import context
from dashboard.observability.redact import RedactFilter, redact

FORMATS = ("console", "json")


class ContextFilter(logging.Filter):
    """Adds the bound log context (context.bind) to a record; fields passed in `extra` win."""

    def filter(self, record: logging.LogRecord) -> bool:
        for name, value in context.current().items():
            if getattr(record, name, None) is None:
                setattr(record, name, value)
        return True


class JsonFormatter(_JsonFormatter):
    """One JSON object per line: timestamp, level, event, logger, the context, any extras."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        kwargs.setdefault("rename_fields", {"levelname": "level", "message": "event", "name": "logger"})
        super().__init__("%(levelname)s %(message)s %(name)s", *args, **kwargs)

    def add_fields(self, log_data: dict[str, Any], record: logging.LogRecord, message_dict: dict[str, Any]) -> None:
        log_data["timestamp"] = datetime.fromtimestamp(record.created, tz=UTC).isoformat(timespec="milliseconds")
        super().add_fields(log_data, record, message_dict)

    def formatException(self, ei: Any) -> str:  # noqa: N802 - logging's name
        return redact(str(super().formatException(ei)))

    def format(self, record: logging.LogRecord) -> str:
        # The whole line: extras a library adds (Django's `request`) are serialized here.
        return redact(super().format(record))


class ConsoleFormatter(logging.Formatter):
    """The plain line the embedded default always printed, plus the context when there is some."""

    def __init__(self) -> None:
        super().__init__("%(asctime)s %(levelname)s %(name)s %(message)s")

    def format(self, record: logging.LogRecord) -> str:
        line = redact(super().format(record))
        fields = [
            f"{name}={getattr(record, name)}" for name in context.FIELDS if getattr(record, name, None) is not None
        ]
        if not fields:
            return line
        head, sep, tail = line.partition("\n")  # the context stays on the message's line
        return f"{head} [{' '.join(fields)}]{sep}{tail}"

    def formatException(self, ei: Any) -> str:  # noqa: N802 - logging's name
        return redact(super().formatException(ei))


def log_format(env: Mapping[str, str]) -> str:
    """RUNLEDGER_LOG_FORMAT, checked: "console" or "json" (settings.RUNLEDGER_LOG_FORMAT, which
    the worker reads to write its start and stop lines as log records when the logs are JSON)."""
    fmt = env.get("RUNLEDGER_LOG_FORMAT", "console").strip().lower() or "console"
    if fmt not in FORMATS:
        from django.core.exceptions import ImproperlyConfigured

        raise ImproperlyConfigured(f"RUNLEDGER_LOG_FORMAT={fmt!r} is not one of {', '.join(FORMATS)}")
    return fmt


def logging_config(env: Mapping[str, str]) -> dict[str, Any]:
    """settings.LOGGING for RUNLEDGER_LOG_FORMAT (console | json) and RUNLEDGER_LOG_LEVEL.

    Every handler redacts (redact.RedactFilter), so records from daphne, Django and libraries,
    which reach the root logger's handler, are redacted too."""
    fmt = log_format(env)
    level = env.get("RUNLEDGER_LOG_LEVEL", "INFO").strip().upper() or "INFO"
    formatter = "json" if fmt == "json" else "plain"
    return {
        "version": 1,
        "disable_existing_loggers": False,
        "filters": {
            "context": {"()": ContextFilter},
            "redact": {"()": RedactFilter},
        },
        "formatters": {
            "plain": {"()": ConsoleFormatter},
            "json": {"()": JsonFormatter},
        },
        "handlers": {
            "console": {"class": "logging.StreamHandler", "formatter": formatter, "filters": ["context", "redact"]},
        },
        "root": {"handlers": ["console"], "level": "WARNING"},
        "loggers": {
            "runledger": {"handlers": ["console"], "level": level, "propagate": False},
            "daphne": {
                "handlers": ["console"],
                "level": env.get("RUNLEDGER_DAPHNE_LOG_LEVEL", "WARNING"),
                "propagate": False,
            },
        },
    }
