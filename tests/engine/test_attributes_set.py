"""`attributes_set`: an instance's first attributes are written in one statement (every shipped
workflow sets them once, as its first step); an instance that has some is merged under its row's
lock. Both paths leave the same rows: the attribute row, its copied columns and one value row per
key (the triggers of migrations 0019 and 0020). Runs on SQLite and PostgreSQL."""

from __future__ import annotations

import pytest
from django.db import connection, transaction
from django.test.utils import CaptureQueriesContext

from ingest.engine import InvalidSearchAttributes, Workflow, create
from ingest.engine.models import InstanceAttributes, InstanceAttributeValue
from ingest.engine.services.attributes import MAX_KEYS, attributes_set


class Tagged(Workflow):
    name = "t-attr-set"

    def run(self, event, step):
        return "ok"


def _values(instance_id: str) -> dict[str, str]:
    return dict(InstanceAttributeValue.objects.filter(instance_id=instance_id).values_list("key", "value"))


def _row(instance_id: str) -> dict[str, str]:
    return dict(InstanceAttributes.objects.get(instance_id=instance_id).attributes)


def _synchronous_commit() -> str:
    with connection.cursor() as cursor:
        cursor.execute("SHOW synchronous_commit")
        return str(cursor.fetchone()[0])


def _first_set_is_one_statement() -> None:
    create("t-attr-set", id="first", params={}, tenant="acme")
    with CaptureQueriesContext(connection) as captured:
        merged = attributes_set(instance_id="first", values={"call_id": "c-1", "n": 7, "gone": None})
    assert merged == {"call_id": "c-1", "n": "7"}
    assert len(captured.captured_queries) == 1, [q["sql"] for q in captured.captured_queries]
    assert _row("first") == _values("first") == {"call_id": "c-1", "n": "7"}
    copy = InstanceAttributes.objects.filter(instance_id="first").values("tenant", "workflow").get()
    assert copy == {"tenant": "acme", "workflow": "t-attr-set"}


@pytest.mark.django_db
def test_an_instances_first_attributes_are_one_statement_with_their_value_rows():
    _first_set_is_one_statement()


@pytest.mark.django_db(transaction=True)
@pytest.mark.usefixtures("require_postgres")
def test_outside_a_transaction_the_first_set_is_one_statement_and_leaves_the_session_as_it_was():
    _first_set_is_one_statement()
    # Its commit did not wait for the WAL flush, but only that statement's: the setting was local.
    assert _synchronous_commit() == "on"


@pytest.mark.django_db(transaction=True)
@pytest.mark.usefixtures("require_postgres")
def test_inside_a_callers_transaction_the_first_set_leaves_its_commit_synchronous_and_rolls_back_with_it():
    create("t-attr-set", id="outer", params={})
    with pytest.raises(RuntimeError), transaction.atomic():
        attributes_set(instance_id="outer", values={"domain": "a.com"})
        assert _synchronous_commit() == "on"  # the caller's other writes still wait for the flush
        assert _row("outer") == {"domain": "a.com"}
        raise RuntimeError("the caller gives up")
    assert not InstanceAttributes.objects.filter(instance_id="outer").exists()
    assert _values("outer") == {}


@pytest.mark.django_db
def test_a_later_set_merges_removes_and_a_repeat_changes_nothing():
    create("t-attr-set", id="merge", params={})
    attributes_set(instance_id="merge", values={"customer": "acme", "domain": "a.com"})
    assert attributes_set(instance_id="merge", values={"domain": "b.com", "customer": None, "vip": True}) == {
        "domain": "b.com",
        "vip": "true",
    }
    assert _row("merge") == _values("merge") == {"domain": "b.com", "vip": "true"}
    with CaptureQueriesContext(connection) as captured:  # a step that re-runs sets the same again
        assert attributes_set(instance_id="merge", values={"domain": "b.com"}) == {"domain": "b.com", "vip": "true"}
    assert not [q for q in captured.captured_queries if q["sql"].lstrip().upper().startswith("UPDATE")]
    assert _row("merge") == {"domain": "b.com", "vip": "true"}


@pytest.mark.django_db
def test_too_many_keys_on_a_new_instance_are_refused_and_write_nothing():
    create("t-attr-set", id="many", params={})
    with pytest.raises(InvalidSearchAttributes, match=f"would have {MAX_KEYS + 1} search attributes"):
        attributes_set(instance_id="many", values={f"k{i}": i for i in range(MAX_KEYS + 1)})
    assert not InstanceAttributes.objects.filter(instance_id="many").exists()
    assert _values("many") == {}
    assert attributes_set(instance_id="many", values={f"k{i}": i for i in range(MAX_KEYS)}) == {
        f"k{i}": str(i) for i in range(MAX_KEYS)
    }


@pytest.mark.django_db
def test_a_merge_past_the_cap_is_refused_and_keeps_what_was_there():
    create("t-attr-set", id="cap", params={})
    attributes_set(instance_id="cap", values={f"k{i}": i for i in range(MAX_KEYS)})
    with pytest.raises(InvalidSearchAttributes, match=f"would have {MAX_KEYS + 1}"):
        attributes_set(instance_id="cap", values={"one_more": "x"})
    assert len(_row("cap")) == len(_values("cap")) == MAX_KEYS


class TaggedAsync(Workflow):
    name = "t-attr-set-async"

    async def run(self, event, step):
        first = await step.set_search_attributes(customer="acme", n=7)
        merged = await step.set_search_attributes(customer=None, domain="a.com")
        return {"first": first, "merged": merged}


@pytest.mark.django_db(transaction=True)  # the async steps run on threads of their own
def test_an_async_workflow_sets_and_merges_through_the_same_deferred_step(monkeypatch, drain):
    from ingest.engine import get
    from ingest.engine.runtime.execution import Execution

    deferred: list[tuple[str, bool]] = []
    succeeded = Execution.succeeded

    def spy(self, p, ctx, started, result, *rest):
        deferred.append((p.label, p.deferred))
        return succeeded(self, p, ctx, started, result, *rest)

    monkeypatch.setattr(Execution, "succeeded", spy)
    create("t-attr-set-async", id="async", params={})
    drain()
    status = get("async").status()
    assert status["status"] == "complete"
    assert status["output"] == {"first": {"customer": "acme", "n": "7"}, "merged": {"n": "7", "domain": "a.com"}}
    assert [deferred_ for _, deferred_ in deferred] == [True, True] and len(deferred) == 2
    assert _row("async") == _values("async") == {"n": "7", "domain": "a.com"}
