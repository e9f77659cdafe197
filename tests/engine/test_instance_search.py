"""`engine_instance_search` (migration 0006): the params' text, kept by database triggers, so the
instance list's "text in params" filter has its trigram index off the instance row that every
claim and completion rewrites."""

from __future__ import annotations

import pytest
from django.db import connection

from ingest.engine import Workflow, create, create_batch
from ingest.engine.models import Instance, InstanceSearch, Status
from ingest.engine.worker.turns import run_until_idle


class Quiet(Workflow):
    name = "t-search-quiet"

    def run(self, event, step):
        return step.do("one", lambda: 1)


def _text(instance_id: str) -> str:
    return InstanceSearch.objects.get(instance_id=instance_id).text


@pytest.mark.django_db
def test_every_way_of_creating_an_instance_writes_its_params_text():
    create("t-search-quiet", id="by-create", params={"domain": "Müller-Logistik.example", "n": 1})
    create_batch("t-search-quiet", [{"id": f"by-batch-{i}", "params": {"account": f"Acme {i}"}} for i in range(3)])
    Instance.objects.create(
        id="by-orm",
        workflow="t-search-quiet",
        params={"account": "Northwind"},
        created_at="2026-11-01T00:00:00Z",
        updated_at="2026-11-01T00:00:00Z",
    )

    assert "Müller-Logistik.example" in _text("by-create")
    assert [f"Acme {i}" in _text(f"by-batch-{i}") for i in range(3)] == [True] * 3
    assert "Northwind" in _text("by-orm")
    # SQLite's LIKE ignores the case of ASCII letters only: the "ü" is written as stored.
    found = Instance.objects.filter(search__text__icontains="Müller-logistik").values_list("id", flat=True)
    assert list(found) == ["by-create"]
    assert set(Instance.objects.filter(search__text__icontains="acme").values_list("id", flat=True)) == {
        "by-batch-0",
        "by-batch-1",
        "by-batch-2",
    }


@pytest.mark.django_db
def test_an_edit_of_params_is_followed_and_a_deleted_instance_takes_its_row_along():
    create("t-search-quiet", id="edited", params={"account": "Before GmbH"})
    Instance.objects.filter(id="edited").update(params={"account": "After AG"})
    assert "After AG" in _text("edited") and "Before" not in _text("edited")

    Instance.objects.filter(id="edited").delete()
    assert not InstanceSearch.objects.filter(instance_id="edited").exists()


@pytest.mark.django_db
@pytest.mark.usefixtures("require_postgres")
def test_claims_and_completions_leave_the_search_row_alone_and_the_filter_uses_its_trigram_index():
    create("t-search-quiet", id="ran", params={"account": "Quiet Harbour"})
    xmin = _row_version("ran")
    assert run_until_idle() >= 1
    assert Instance.objects.get(id="ran").status == Status.COMPLETE
    assert _row_version("ran") == xmin  # the claim and the completion did not rewrite it

    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT indexdef FROM pg_indexes WHERE tablename = 'engine_instance' AND indexdef LIKE '%USING gin%'"
        )
        assert cursor.fetchall() == []
        cursor.execute("SELECT indexname FROM pg_indexes WHERE tablename = 'engine_instance_search' ORDER BY 1")
        assert [r[0] for r in cursor.fetchall()] == ["engine_instance_search_pkey", "engine_instance_search_trgm"]
        # A ledger of some size (the planner walks a table of a handful of rows whatever the
        # indexes), through the instance insert, so the trigger fills the search table too.
        cursor.execute(
            "INSERT INTO engine_instance (id, workflow, tenant, status, params, error_name, error_message, "
            "created_at, updated_at, priority, control, paused_from, lease_owner, lease_token, generation, "
            "run_count, concurrency_key, parent_step) "
            "SELECT 'bulk-' || n, 't-search-quiet', 'default', 'complete', "
            "jsonb_build_object('account', 'Account ' || n, 'note', md5(n::text)), '', '', now(), now(), 0, '', '', "
            "'', '', 0, 1, '', '' FROM generate_series(1, 5000) AS n"
        )
        cursor.execute("ANALYZE engine_instance_search")
        cursor.execute("ANALYZE engine_instance")
        # The planner prices a GIN index high on a table this small: a scan of the whole table,
        # or of its primary key, comes out cheaper. Without those, the index must serve the
        # dashboard's predicate (the lookup it filters instances with, on this table).
        cursor.execute("SET LOCAL enable_seqscan = off")
        cursor.execute("SET LOCAL enable_indexscan = off")
        sql, params = (
            InstanceSearch.objects.filter(text__icontains="harbour").values("instance_id").query.sql_with_params()
        )
        cursor.execute(f"EXPLAIN {sql}", params)
        plan = "\n".join(row[0] for row in cursor.fetchall())
    assert "engine_instance_search_trgm" in plan, plan
    assert list(Instance.objects.filter(search__text__icontains="harbour").values_list("id", flat=True)) == ["ran"]


def _row_version(instance_id: str) -> str:
    with connection.cursor() as cursor:
        cursor.execute("SELECT xmin::text FROM engine_instance_search WHERE instance_id = %s", [instance_id])
        return cursor.fetchone()[0]
