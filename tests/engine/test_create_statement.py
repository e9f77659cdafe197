"""The one-statement create (PostgreSQL): its columns come from the models, each value prepared
as the ORM prepares it; a value only the ORM can write (a database default) is refused loudly."""

from __future__ import annotations

import json
from typing import Any

import pytest
from django.db import connection
from django.db.models.expressions import DatabaseDefault
from django.utils import timezone

from ingest.engine import InstanceAlreadyExists, RowUnchanged, row_digest_sql
from ingest.engine.models import History, Instance
from ingest.engine.services.instances import instance_create
from ingest.engine.sql import create as sql_create

pytestmark = [pytest.mark.db, pytest.mark.django_db]


def test_a_database_default_value_is_refused_before_anything_is_sent() -> None:
    field = Instance._meta.get_field("workflow_version")
    inst = Instance(
        id="x-1",
        workflow="w",
        tenant="t",
        created_at=timezone.now(),
        updated_at=timezone.now(),
        workflow_version=DatabaseDefault(field.db_default, output_field=field),
    )
    with pytest.raises(TypeError, match="workflow_version"):
        sql_create._params(Instance, inst, "i")


def test_a_row_given_as_values_is_prepared_as_its_model_would_be_with_defaults_for_the_rest() -> None:
    from ingest.engine.services.base import created_history_values, new_instance_values
    from tests.engine.test_create_statement_support import Plain  # noqa: F401  (registers the workflow)

    values = new_instance_values(
        workflow="plain-create",
        id="v-1",
        params={"a": [1, "é"]},
        tenant="acme",
        priority=None,
        start_at=None,
        now=timezone.now(),
    )
    history = created_history_values(values, actor="tester", reason="why")

    def plain(params: dict[str, Any]) -> dict[str, Any]:
        return {k: getattr(v, "obj", v) for k, v in params.items()}  # a JSON value is wrapped for the driver

    by_values = plain(sql_create._params(Instance, values, "i"))
    assert by_values == plain(sql_create._params(Instance, Instance(**values), "i"))
    column = [f.attname for f in sql_create._insertable(Instance)].index("params")
    sent = by_values[f"i{column}"]
    assert (json.loads(sent) if isinstance(sent, str) else sent) == {"a": [1, "é"]}  # SQLite gets JSON text
    assert plain(sql_create._params(History, history, "h")) == plain(
        sql_create._params(History, History(**history), "h")
    )


@pytest.mark.django_db(transaction=True)
def test_starting_an_instance_writes_the_rows_creating_it_writes_and_answers_its_id(require_postgres: None) -> None:
    from ingest.engine.services.instances import instance_start
    from tests.engine.test_create_statement_support import Plain  # noqa: F401  (registers the workflow)

    assert (
        instance_start(workflow="plain-create", id="start-1", params={"a": 1}, tenant="acme", actor="me") == "start-1"
    )
    instance_create(workflow="plain-create", id="create-1", params={"a": 1}, tenant="acme", actor="me")
    started, created = Instance.objects.get(pk="start-1"), Instance.objects.get(pk="create-1")
    skip = {"id", "created_at", "updated_at", "ready_at"}
    fields = [f.attname for f in Instance._meta.concrete_fields if f.attname not in skip]
    assert [getattr(started, f) for f in fields] == [getattr(created, f) for f in fields]
    assert started.ready_at == started.created_at
    assert list(History.objects.filter(instance_id="start-1").values_list("kind", "actor", "status")) == [
        ("instance.created", "me", "queued")
    ]
    with pytest.raises(InstanceAlreadyExists):
        instance_start(workflow="plain-create", id="start-1", params={"b": 2}, tenant="acme")
    assert Instance.objects.get(pk="start-1").params == {"a": 1}


@pytest.mark.django_db(transaction=True)  # as the webhooks call it: no transaction around it
def test_a_create_writes_every_column_as_the_orm_would_and_a_duplicate_writes_nothing(
    require_postgres: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    from tests.engine.test_create_statement_support import Plain  # noqa: F401  (registers the workflow)

    statements: list[Any] = []
    real = sql_create.prepared_row
    monkeypatch.setattr(sql_create, "prepared_row", lambda s, p: statements.append(s) or real(s, p))
    made = instance_create(
        workflow="plain-create", id="plain-1", params={"a": [1, "é"]}, tenant="acme", priority=3, actor="tester"
    )
    assert len(statements) == 1 and connection.vendor == "postgresql"
    row = Instance.objects.get(pk="plain-1")
    assert (row.params, row.tenant, row.priority, row.status, row.created_at) == (
        {"a": [1, "é"]},
        "acme",
        3,
        "queued",
        made.created_at,
    )
    assert row.workflow_version == made.workflow_version
    history = History.objects.get(instance_id="plain-1")
    assert (history.kind, history.actor, history.status) == ("instance.created", "tester", "queued")
    with pytest.raises(InstanceAlreadyExists):
        instance_create(workflow="plain-create", id="plain-1", params={"b": 2}, tenant="acme")
    assert Instance.objects.get(pk="plain-1").params == {"a": [1, "é"]}
    assert History.objects.filter(instance_id="plain-1").count() == 1


@pytest.mark.django_db(transaction=True)
def test_a_create_only_if_a_kept_row_is_unchanged_writes_nothing_once_it_changed_and_says_so(
    require_postgres: None,
) -> None:
    from ingest.engine.errors import CheckedRowsChanged
    from tests.engine.test_create_statement_support import Plain  # noqa: F401  (registers the workflow)

    # The row the caller kept: an instance of its own, read with its digest as a caller reads it.
    instance_create(workflow="plain-create", id="anchor-1", params={}, tenant="acme")
    fields = ("tenant", "status")
    with connection.cursor() as cursor:
        cursor.execute(
            f"SELECT {row_digest_sql(Instance, fields, 'a')} FROM engine_instance a WHERE a.id = %s", ["anchor-1"]
        )
        digest = cursor.fetchone()[0]
    holds = RowUnchanged(model=Instance, pk="anchor-1", fields=fields, digest=digest)
    stale = RowUnchanged(model=Instance, pk="anchor-1", fields=fields, digest="a digest read before a change")
    gone = RowUnchanged(model=Instance, pk="no-such-row", fields=fields, digest=digest)
    for changed in (stale, gone):
        with pytest.raises(CheckedRowsChanged):
            instance_create(workflow="plain-create", id="guarded-1", params={}, tenant="acme", only_if=changed)
    assert not Instance.objects.filter(pk="guarded-1").exists()
    instance_create(workflow="plain-create", id="guarded-1", params={}, tenant="acme", only_if=holds)
    with pytest.raises(InstanceAlreadyExists):  # a duplicate is "already processed" only while the row is unchanged
        instance_create(workflow="plain-create", id="guarded-1", params={}, tenant="acme", only_if=holds)
    Instance.objects.filter(pk="anchor-1").update(tenant="other")  # the kept row changes
    with pytest.raises(CheckedRowsChanged):
        instance_create(workflow="plain-create", id="guarded-2", params={}, tenant="acme", only_if=holds)
    assert sorted(Instance.objects.values_list("id", flat=True)) == ["anchor-1", "guarded-1"]
    assert History.objects.count() == 2


def test_a_guard_is_refused_where_no_statement_can_check_it() -> None:
    unchanged = RowUnchanged(model=Instance, pk="anchor-1", fields=("tenant",), digest="d")
    with pytest.raises(ValueError, match="only_if"):
        instance_create(
            workflow="plain-create", id="guarded-2", params={}, tenant="acme", only_if=unchanged, first=lambda: None
        )
