"""engine_instance_attributes keeps a copy of its instance's tenant, workflow, status and times
(migration 0019), and engine_instance_attribute_values one row per attribute with the same copy
(0020), written by database triggers in the transaction of each change: the instances list with
an attribute filter reads those copies alone, so a copy that lags would list a run under a status
it left. Runs on SQLite (its own triggers) and PostgreSQL."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.db import connection

from ingest.engine import Workflow, create, get
from ingest.engine.models import Instance, InstanceAttributes, InstanceAttributeValue, Status
from ingest.engine.services.attributes import attributes_set
from ingest.engine.worker.turns import run_until_idle

COPIED = ("tenant", "workflow", "status", "created_at", "started_at", "ended_at")

pytestmark = pytest.mark.django_db


class TaggedNap(Workflow):
    name = "t-attr-nap"

    def run(self, event, step):
        step.set_search_attributes(customer=event.payload["customer"])
        step.sleep("nap", "1 hour")
        return step.do("done", lambda: "ok")


def _copy(instance_id: str) -> dict[str, object]:
    return InstanceAttributes.objects.filter(instance_id=instance_id).values(*COPIED).get()


def _instance(instance_id: str) -> dict[str, object]:
    return Instance.objects.filter(id=instance_id).values(*COPIED).get()


def _values(instance_id: str) -> dict[str, str]:
    """The instance's value rows as {key: value}, after checking each carries the instance's
    columns as they are now."""
    rows = list(InstanceAttributeValue.objects.filter(instance_id=instance_id).values("key", "value", *COPIED))
    now = _instance(instance_id)
    for row in rows:
        assert {c: row[c] for c in COPIED} == now, (instance_id, row["key"])
    return {row["key"]: row["value"] for row in rows}


def _attributes(instance_id: str) -> dict[str, str]:
    return dict(InstanceAttributes.objects.get(instance_id=instance_id).attributes)


def test_the_copy_follows_the_engine_through_a_run():
    create("t-attr-nap", id="nap-1", params={"customer": "acme"})
    run_until_idle()
    assert _instance("nap-1")["status"] == Status.WAITING
    assert _copy("nap-1") == _instance("nap-1")
    assert _copy("nap-1")["started_at"] is not None
    assert _values("nap-1") == {"customer": "acme"}

    run_until_idle(advance_clock=True)
    assert _instance("nap-1")["status"] == Status.COMPLETE
    assert _copy("nap-1") == _instance("nap-1")
    assert _copy("nap-1")["ended_at"] is not None
    assert _values("nap-1") == {"customer": "acme"}


def test_the_copy_follows_operator_actions():
    create("t-attr-nap", id="nap-2", params={"customer": "acme"})
    run_until_idle()
    get("nap-2").pause()
    assert _copy("nap-2")["status"] == _instance("nap-2")["status"] == Status.PAUSED
    assert _values("nap-2") == {"customer": "acme"}
    get("nap-2").terminate()
    assert _copy("nap-2")["status"] == Status.TERMINATED
    assert _copy("nap-2") == _instance("nap-2")
    assert _values("nap-2") == {"customer": "acme"}


def test_any_update_of_a_copied_column_is_followed_and_an_instance_without_attributes_gets_no_row():
    create("t-attr-nap", id="plain", params={"customer": "x"})
    create("t-attr-nap", id="tagged", params={"customer": "x"})
    attributes_set(instance_id="tagged", values={"domain": "a.com"})
    assert _copy("tagged") == _instance("tagged")
    later = _instance("tagged")["created_at"] + timedelta(minutes=5)  # type: ignore[operator]
    Instance.objects.filter(id__in=["plain", "tagged"]).update(
        status=Status.ERRORED, workflow="renamed", tenant="globex", started_at=later, ended_at=later
    )
    assert _copy("tagged") == _instance("tagged")
    assert _copy("tagged")["tenant"] == "globex" and _copy("tagged")["workflow"] == "renamed"
    assert _values("tagged") == {"domain": "a.com"}
    Instance.objects.filter(id="tagged").update(started_at=None, ended_at=None)
    assert (_copy("tagged")["started_at"], _copy("tagged")["ended_at"]) == (None, None)
    assert _values("tagged") == {"domain": "a.com"}
    assert not InstanceAttributes.objects.filter(instance_id="plain").exists()
    assert not InstanceAttributeValue.objects.filter(instance_id="plain").exists()


def test_a_raw_insert_of_attributes_copies_the_instance_columns_and_a_later_merge_keeps_them():
    create("t-attr-nap", id="raw", params={"customer": "x"})
    Instance.objects.filter(id="raw").update(status=Status.ERRORED, tenant="initech")
    with connection.cursor() as cursor:
        # A bulk load names only the attributes, as bench/instances_list.py does.
        cursor.execute(
            "INSERT INTO engine_instance_attributes (instance_id, attributes) VALUES (%s, %s)",
            ["raw", '{"customer": "acme"}'],
        )
    assert _copy("raw") == _instance("raw")
    assert _values("raw") == {"customer": "acme"}
    attributes_set(instance_id="raw", values={"domain": "b.com"})
    assert _copy("raw") == _instance("raw")
    assert _attributes("raw") == _values("raw") == {"customer": "acme", "domain": "b.com"}


def test_value_rows_follow_each_merge_removal_and_delete_of_the_attributes():
    create("t-attr-nap", id="vals", params={"customer": "x"})
    create("t-attr-nap", id="other", params={"customer": "x"})
    attributes_set(instance_id="vals", values={"customer": "acme", "domain": "a.com", "n": 7, "vip": True})
    attributes_set(instance_id="other", values={"customer": "acme"})
    assert _values("vals") == {"customer": "acme", "domain": "a.com", "n": "7", "vip": "true"}
    attributes_set(instance_id="vals", values={"domain": "b.com", "n": None})
    assert _attributes("vals") == _values("vals") == {"customer": "acme", "domain": "b.com", "vip": "true"}
    Instance.objects.filter(id="vals").update(status=Status.ERRORED)  # after the rewrite: still followed
    assert _values("vals") == {"customer": "acme", "domain": "b.com", "vip": "true"}
    # An instance's deletion takes its attribute row (Django's cascade), and that its value rows.
    Instance.objects.filter(id="vals").delete()
    assert not InstanceAttributeValue.objects.filter(instance_id="vals").exists()
    assert _values("other") == {"customer": "acme"}


@pytest.mark.usefixtures("require_postgres")
def test_updates_that_change_no_copied_column_leave_the_attribute_row_alone():
    create("t-attr-nap", id="quiet", params={"customer": "x"})
    attributes_set(instance_id="quiet", values={"domain": "a.com"})
    before = _row_version("quiet")
    Instance.objects.filter(id="quiet").update(lease_owner="w1", run_count=3, status=_instance("quiet")["status"])
    assert _row_version("quiet") == before  # the follow trigger did not fire: same row version


def _row_version(instance_id: str) -> str:
    with connection.cursor() as cursor:
        cursor.execute("SELECT xmin::text FROM engine_instance_attributes WHERE instance_id = %s", [instance_id])
        row = cursor.fetchone()
    assert row is not None
    return str(row[0])


@pytest.mark.django_db(transaction=True)
@pytest.mark.usefixtures("require_postgres")
def test_attributes_set_while_a_status_change_is_in_flight_copy_the_status_it_commits():
    """The insert's copy reads the instance FOR SHARE: it waits for the update in flight (whose
    own trigger found no attribute row to follow) and copies what that update committed."""
    import threading

    from django.db import connections, transaction

    create("t-attr-nap", id="race", params={"customer": "x"})
    failures: list[BaseException] = []

    def tag() -> None:
        try:
            attributes_set(instance_id="race", values={"domain": "a.com"})
        except BaseException as exc:  # noqa: BLE001 - reported by the test below
            failures.append(exc)
        finally:
            connections.close_all()

    tagger = threading.Thread(target=tag)
    with transaction.atomic():
        Instance.objects.filter(id="race").update(status=Status.ERRORED)
        tagger.start()
        tagger.join(0.5)
        assert tagger.is_alive()  # waiting for this transaction's row lock
    tagger.join(10)
    assert not tagger.is_alive() and failures == []
    assert _copy("race")["status"] == Status.ERRORED == _instance("race")["status"]
    assert _values("race") == {"domain": "a.com"}
