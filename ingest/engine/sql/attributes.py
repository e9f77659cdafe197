"""An instance's first search attributes, inserted in one statement."""

from __future__ import annotations

import json
from collections.abc import Callable

from django.db import connection

from ingest.engine.sql.base import ByVendor, prepared_row

_INSERT_NEW = """INSERT INTO engine_instance_attributes (instance_id, attributes) VALUES (%s, %s)
    ON CONFLICT (instance_id) DO NOTHING RETURNING 1"""
_INSERT_NEW_PG = """INSERT INTO engine_instance_attributes (instance_id, attributes) VALUES (%s, %s::jsonb)
    ON CONFLICT (instance_id) DO NOTHING RETURNING 1"""
_INSERT_NEW_PG_ALONE = """WITH c AS (SELECT set_config('synchronous_commit', 'off', true) AS v)
    INSERT INTO engine_instance_attributes (instance_id, attributes) SELECT %s, %s::jsonb FROM c
    ON CONFLICT (instance_id) DO NOTHING RETURNING 1"""


def attributes_insert_new(*, instance_id: str, attributes: dict[str, str]) -> bool:
    """Whether the instance's row was inserted with `attributes` (False: it exists already)."""
    return _insert_new()(instance_id, json.dumps(attributes))


def _insert_prepared(instance_id: str, text: str) -> bool:
    statement = _INSERT_NEW_PG if connection.in_atomic_block else _INSERT_NEW_PG_ALONE
    return prepared_row(statement, (instance_id, text)) is not None


def _insert_plain(instance_id: str, text: str) -> bool:
    with connection.cursor() as cursor:
        cursor.execute(_INSERT_NEW, (instance_id, text))
        return cursor.fetchone() is not None


_insert_new = ByVendor[Callable[[str, str], bool]](postgresql=_insert_prepared, sqlite=_insert_plain)
