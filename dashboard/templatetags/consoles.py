"""Template filters of the schedules, routes and workers pages."""

from __future__ import annotations

import json
from typing import Any

from django import template

register = template.Library()


@register.filter
def compact_json(value: Any) -> str:
    """A small JSON value on one line, as an operator would type it: {"debounce": {"key": "a"}}."""
    return json.dumps(value, ensure_ascii=False, separators=(", ", ": "), default=str)
