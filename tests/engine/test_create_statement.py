"""The one-statement create (PostgreSQL): its columns come from the models, each value prepared
as the ORM prepares it; a value only the ORM can write (a database default) is refused loudly."""

from __future__ import annotations

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
        sql_create._params(inst, "i")


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
