"""An instance and its creation history in one statement (PostgreSQL), optionally behind a
caller's own insert that decides whether the instance is created (an idempotency key): one round
trip and one implicit transaction where the ORM took BEGIN, an INSERT per row and COMMIT.

The column lists come from the models, so a column added by a migration is written here as the
ORM writes it (each value goes through its field's `get_db_prep_save`); every value is cast to
its column's type, since a bare NULL in a SELECT list is text to PostgreSQL.
"""

from __future__ import annotations

import functools
from collections.abc import Mapping
from typing import Any

from django.db import DEFAULT_DB_ALIAS, connection, connections, models
from django.db.models import AutoField, BigAutoField, Field, Model

from ingest.engine.conditions import Lead, RowUnchanged, row_digest_sql
from ingest.engine.models import History, Instance
from ingest.engine.sql.base import prepared_row


@functools.cache
def _insertable(model: type[Model]) -> tuple[Field[Any, Any], ...]:
    return tuple(f for f in model._meta.concrete_fields if not isinstance(f, AutoField | BigAutoField))


@functools.cache
def _values(model: type[Model], prefix: str) -> tuple[str, str]:
    """`"col", ...` and `%(<prefix>0)s::type, ...` of the model's insertable columns."""
    fields = _insertable(model)
    quote = connection.ops.quote_name
    columns = ", ".join(quote(str(f.column)) for f in fields)
    values = ", ".join(f"%({prefix}{n})s::{f.cast_db_type(connection)}" for n, f in enumerate(fields))
    return columns, values


# Fields whose Python value is what PostgreSQL gets (the column's cast does the rest): the ORM's
# preparation of each, through several calls per field, was most of this statement's CPU.
_PLAIN = {
    models.CharField,
    models.TextField,
    models.SlugField,
    models.IntegerField,
    models.BigIntegerField,
    models.SmallIntegerField,
    models.PositiveIntegerField,
    models.PositiveSmallIntegerField,
    models.PositiveBigIntegerField,
    models.BooleanField,
    models.FloatField,
}


def _is_plain(field: Field[Any, Any]) -> bool:
    if type(field) is models.DateTimeField:
        return not (field.auto_now or field.auto_now_add)
    return type(field) in _PLAIN  # exact: a subclass (an encrypted text, say) prepares its value


@functools.cache
def _preparation(model: type[Model]) -> tuple[tuple[str, Field[Any, Any], bool, bool], ...]:
    """Per insertable field: its attribute name, the field, whether its value goes as it is, and
    whether its value is what the row holds (no `pre_save` of its own, as an auto_now date has)."""
    return tuple((f.attname, f, _is_plain(f), type(f).pre_save is Field.pre_save) for f in _insertable(model))


Row = Model | Mapping[str, Any]


def _params(model: type[Model], row: Row, prefix: str) -> dict[str, Any]:
    """The statement's parameters for one row of `model`: a model instance, or its field values by
    attribute name (a field left out gets its default, as the model's constructor gives it),
    which spares building the instance where nothing reads it afterwards."""
    # The connection itself, not Django's proxy: a field asks it for its operations, and through
    # the proxy every ask is a context-local lookup.
    db = connections[DEFAULT_DB_ALIAS]
    params = {}
    for n, (attname, field, plain, as_is) in enumerate(_preparation(model)):
        if isinstance(row, Model):
            value = getattr(row, attname) if plain else field.get_db_prep_save(field.pre_save(row, True), db)
        else:
            value = row[attname] if attname in row else field.get_default()
            if not plain:
                if not as_is:
                    raise TypeError(f"{model.__name__}.{attname} computes its value on save; pass a model instance")
                value = field.get_db_prep_save(value, db)
        if hasattr(value, "resolve_expression"):
            # A database default or an expression: the ORM writes it into the SQL; this
            # statement's columns are fixed. Give the field a Python default.
            raise TypeError(f"{model.__name__}.{attname} is {value!r}; the one-statement create takes values only")
        params[f"{prefix}{n}"] = value
    return params


@functools.cache
def _statement(lead_sql: str | None, probe: str, guard_sql: str | None = None) -> str:
    inst_cols, inst_values = _values(Instance, "i")
    hist_cols, hist_values = _values(History, "h")
    if lead_sql is None:
        # Without a lead the instance id decides: a duplicate id writes nothing (a concurrent
        # twin waits on the unique index until the first commits, then writes nothing).
        head = ""
        where = "" if guard_sql is None else f" WHERE {guard_sql}"
        insert = f"SELECT {inst_values}{where} ON CONFLICT (id) DO NOTHING"
    else:
        # Behind a lead a duplicate id is an IntegrityError: the lead's row must not be left
        # without its instance (the caller retries with a new id).
        head = f"lead AS ({lead_sql}), "
        insert = f"SELECT {inst_values} FROM lead"
    return (
        f"WITH {head}ins AS (INSERT INTO {Instance._meta.db_table} ({inst_cols}) {insert} RETURNING 1), "
        f"hist AS (INSERT INTO {History._meta.db_table} ({hist_cols}) SELECT {hist_values} FROM ins) "
        f"SELECT EXISTS (SELECT 1 FROM ins), probe.* FROM (SELECT 1) one "
        f"LEFT JOIN LATERAL ({probe}) probe ON true"
    )


@functools.cache
def _unchanged_sql(model: type[Model], fields: tuple[str, ...]) -> str:
    """The boolean expression of a `RowUnchanged` on `model`'s `fields`: fixed text per (model,
    fields), so its statement is prepared once."""
    quote = connection.ops.quote_name
    pk = quote(str(model._meta.pk.column))
    return (
        f"EXISTS (SELECT 1 FROM {quote(model._meta.db_table)} g WHERE g.{pk} = %(g_pk)s"
        f" AND {row_digest_sql(model, fields, 'g')} = %(g_digest)s)"
    )


def instance_insert(
    inst: Row, history: Row, *, lead: Lead | None = None, only_if: RowUnchanged | None = None
) -> tuple[bool, tuple[Any, ...]]:
    """Insert `inst` and `history` (model instances, or their field values by attribute name) in
    one statement on this thread's connection (in its transaction if one is open, else as a
    transaction of its own): (inserted, the lead's probe row, all None when it found nothing).
    With `only_if` (and no lead) the probe row is `(whether the row was unchanged,)`."""
    params = {**_params(Instance, inst, "i"), **_params(History, history, "h")}
    if lead is not None:
        params.update(lead.params)
        statement = _statement(lead.sql, lead.probe)
    elif only_if is not None:
        params.update(g_pk=only_if.pk, g_digest=only_if.digest)
        condition = _unchanged_sql(only_if.model, only_if.fields)
        statement = _statement(None, f"SELECT ({condition}) AS held", condition)
    else:
        statement = _statement(None, "SELECT NULL")
    row = prepared_row(statement, params)
    assert row is not None  # the outer SELECT always returns one row
    return bool(row[0]), tuple(row[1:])
