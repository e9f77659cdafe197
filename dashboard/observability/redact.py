"""Secrets never reach a log line: the logging filter that applies `ingest.engine.redaction`.

The filter rewrites the whole formatted message and traceback of every record a handler emits
(attached to the handlers, not the loggers, so records that propagate from daphne, Django or a
library pass through it too); the formatters (logconfig.py) redact the finished line once more,
which covers what a record carries besides its message (Django's `request` extra, whose repr
holds the path and so a webhook's key).
"""

from __future__ import annotations

import logging

from ingest.engine import MASK, redact

__all__ = ["MASK", "RedactFilter", "redact"]


class RedactFilter(logging.Filter):
    """Rewrites a record in place: its message (args merged), its traceback and string extras.

    The record keeps no args afterwards, so no formatter can re-insert a secret from them."""

    # Attributes a formatter may print besides the message (our access log's fields).
    EXTRA_TEXT = ("path", "url", "query")

    def filter(self, record: logging.LogRecord) -> bool:
        try:
            message = record.getMessage()
        except Exception:  # noqa: BLE001 - a malformed call still gets logged, as logging does
            message = str(record.msg)
        record.msg, record.args = redact(message), None
        if record.exc_info and not record.exc_text:
            record.exc_text = logging.Formatter().formatException(record.exc_info)
        if record.exc_text:
            record.exc_text = redact(record.exc_text)
        for name in self.EXTRA_TEXT:
            value = getattr(record, name, None)
            if isinstance(value, str):
                setattr(record, name, redact(value))
        return True
