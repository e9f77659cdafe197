"""Event routing decisions: which subscriptions an event matches. Pure functions."""

from __future__ import annotations

import re
from fnmatch import fnmatchcase
from typing import Any

_MISSING = object()
EVENT_TYPE = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9_.:/-]{0,199}$")


def type_matches(pattern: str, event_type: str) -> bool:
    """Glob match, case-sensitive: `user.*` matches `user.created`, `gong.call.*` `gong.call.done`."""
    return fnmatchcase(event_type, pattern)


def field(data: Any, path: str) -> Any:
    """`a.b.c` looked up in nested dicts; a missing field is `_MISSING`, never None."""
    current = data
    for part in path.split("."):
        if not isinstance(current, dict) or part not in current:
            return _MISSING
        current = current[part]
    return current


def filters_match(filters: dict[str, Any], data: Any) -> bool:
    """Every filter field equals the payload's; a list filter means any of its values."""
    for path, expected in (filters or {}).items():
        actual = field(data, path)
        if actual is _MISSING:
            return False
        if isinstance(expected, list):
            if actual not in expected:
                return False
        elif actual != expected:
            return False
    return True
