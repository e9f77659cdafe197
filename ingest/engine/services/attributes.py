"""Search attributes: validate and merge the tags a workflow sets on its instance."""

from __future__ import annotations

import re
from typing import Any

from django.db import transaction

from ingest.engine.errors import InvalidSearchAttributes
from ingest.engine.models import InstanceAttributes

KEY = re.compile(r"^[a-z][a-z0-9_]{0,39}$")
MAX_KEYS = 20
MAX_VALUE = 200


def attributes_check(values: dict[str, Any]) -> dict[str, str | None]:
    """The attributes as stored: text values (numbers and booleans as their text), None to remove
    a key. Raises InvalidSearchAttributes naming the first bad key or value."""
    out: dict[str, str | None] = {}
    for key, value in values.items():
        if not isinstance(key, str) or not KEY.match(key):
            raise InvalidSearchAttributes(
                f"search attribute key {str(key)[:60]!r} is not allowed: use lower-case letters, digits and "
                "underscores, starting with a letter, at most 40 characters (e.g. customer, call_id)")
        if value is None:
            out[key] = None
            continue
        if isinstance(value, bool):
            text = "true" if value else "false"
        elif isinstance(value, int | float | str):
            text = str(value)
        else:
            raise InvalidSearchAttributes(f"search attribute {key!r} is a {type(value).__name__}; values are "
                                          "text, numbers or booleans")
        if len(text) > MAX_VALUE or "\x00" in text:
            raise InvalidSearchAttributes(f"search attribute {key!r} is {len(text)} characters; at most "
                                          f"{MAX_VALUE}, without NUL")
        out[key] = text
    return out


def attributes_set(*, instance_id: str, values: dict[str, Any]) -> dict[str, str]:
    """Merge `values` into the instance's attributes (None removes a key); returns them all.
    Setting the same values again changes nothing, so a step that re-runs may call it again."""
    checked = attributes_check(values)
    with transaction.atomic():
        row, _ = InstanceAttributes.objects.select_for_update().get_or_create(
            instance_id=instance_id, defaults={"attributes": {}})
        merged = {**row.attributes, **{k: v for k, v in checked.items() if v is not None}}
        for key in (k for k, v in checked.items() if v is None):
            merged.pop(key, None)
        if len(merged) > MAX_KEYS:
            raise InvalidSearchAttributes(f"instance {instance_id} would have {len(merged)} search attributes; "
                                          f"at most {MAX_KEYS}")
        if merged != row.attributes:
            row.attributes = merged
            row.save(update_fields=["attributes"])
    return merged
