"""Error signatures: dead letters with the same cause group together."""

from __future__ import annotations

import hashlib
import re

_RULES: tuple[tuple[re.Pattern[str], str], ...] = (
    (re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}", re.I), "<uuid>"),
    (re.compile(r"\b(?:https?://)\S+"), "<url>"),
    (re.compile(r"\b[\w.+-]+@[\w-]+\.[\w.-]+\b"), "<email>"),
    (re.compile(r"'[^']*'"), "'<str>'"),
    (re.compile(r'"[^"]*"'), '"<str>"'),
    (re.compile(r"\b0x[0-9a-f]+\b", re.I), "<hex>"),
    (re.compile(r"\b[0-9a-f]{12,}\b", re.I), "<hex>"),
    (re.compile(r"\b\d{4}-\d{2}-\d{2}[T ]\d{2}:\d{2}(?::\d{2}(?:\.\d+)?)?(?:Z|[+-]\d{2}:?\d{2})?"), "<time>"),
    (re.compile(r"\d+(?:\.\d+)?"), "<n>"),
    (re.compile(r"\s+"), " "),
)


def normalize_message(message: str) -> str:
    """The message with its variable parts (ids, numbers, quoted values) replaced by placeholders."""
    text = message.strip()[:2000]
    for pattern, placeholder in _RULES:
        text = pattern.sub(placeholder, text)
    return text.strip()


def error_signature(*, workflow: str, step_name: str, error_name: str, message: str) -> tuple[str, str]:
    """(signature, normalized message): a stable hash of workflow, step, error class and message shape."""
    normalized = normalize_message(message)
    step_shape = re.sub(r"-\d+$", "-{i}", step_name)
    digest = hashlib.sha256("\x1f".join((workflow, step_shape, error_name, normalized)).encode()).hexdigest()[:32]
    return digest, normalized
