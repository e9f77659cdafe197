"""Search attributes: validate and merge the tags a workflow sets on its instance."""

from __future__ import annotations

import re
from typing import Any

from django.db import transaction

from ingest.engine.errors import InvalidSearchAttributes
from ingest.engine.models import InstanceAttributes
from ingest.engine.sql import attributes as sql_attributes

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
                "underscores, starting with a letter, at most 40 characters (e.g. customer, call_id)"
            )
        if value is None:
            out[key] = None
            continue
        if isinstance(value, bool):
            text = "true" if value else "false"
        elif isinstance(value, int | float | str):
            text = str(value)
        else:
            raise InvalidSearchAttributes(
                f"search attribute {key!r} is a {type(value).__name__}; values are text, numbers or booleans"
            )
        if len(text) > MAX_VALUE or "\x00" in text:
            raise InvalidSearchAttributes(
                f"search attribute {key!r} is {len(text)} characters; at most {MAX_VALUE}, without NUL"
            )
        out[key] = text
    return out


# The first set of an instance's attributes (every shipped workflow sets them once, first): the
# row inserted with its values in one statement, or nothing when the row exists (then merged
# below). On PostgreSQL without waiting for the WAL flush when it is a transaction of its own, as
# the fact writes: the step's completion, written after it, flushes it, and a crash that loses
# it loses the completion too, so the step runs again.
def attributes_set(*, instance_id: str, values: dict[str, Any]) -> dict[str, str]:
    """Merge `values` into the instance's attributes (None removes a key); returns them all.
    Setting the same values again changes nothing, so a step that re-runs may call it again.

    An instance without attributes yet gets its row in one statement; one that has them is
    merged under the row's lock (get-or-create, then an update if anything changed)."""
    checked = attributes_check(values)
    first = {k: v for k, v in checked.items() if v is not None}
    if len(first) <= MAX_KEYS and sql_attributes.attributes_insert_new(instance_id=instance_id, attributes=first):
        return first
    with transaction.atomic():
        row, _ = InstanceAttributes.objects.select_for_update().get_or_create(
            instance_id=instance_id, defaults={"attributes": {}}
        )
        merged = {**row.attributes, **{k: v for k, v in checked.items() if v is not None}}
        for key in (k for k, v in checked.items() if v is None):
            merged.pop(key, None)
        if len(merged) > MAX_KEYS:
            raise InvalidSearchAttributes(
                f"instance {instance_id} would have {len(merged)} search attributes; at most {MAX_KEYS}"
            )
        if merged != row.attributes:
            row.attributes = merged
            row.save(update_fields=["attributes"])
    return merged
