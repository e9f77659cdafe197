"""Start a run by hand from a workflow's page: the action service starts it and audits it; every
invalid field is shown at once and nothing starts; only operators of a tenant start runs in it."""

from __future__ import annotations

import html
from datetime import timedelta

import pytest
from django.test import Client
from django.utils import timezone
from workflows_for_tests import DEMO

from dashboard.access import user_ensure
from dashboard.models import AuditEntry, Role
from ingest.engine.models import Instance

pytestmark = pytest.mark.db
URL = f"/workflows/{DEMO}/start/"


def _start(client: Client, **data: str) -> tuple[int, str]:
    body = {
        "params": '{"account": "acme", "limit": 5}',
        "tenant": "acme",
        "id": "",
        "priority": "0",
        "start_at": "",
        **data,
    }
    r = client.post(URL, body)
    return r.status_code, r["Location"] if r.status_code == 303 else html.unescape(r.content.decode())


def test_the_workflow_page_offers_start_run_to_an_operator_even_before_its_first_run(operator, viewer):
    page = operator.get(f"/workflows/{DEMO}/").content.decode()
    assert 'id="start-form"' in page and f'action="/workflows/{DEMO}/start/"' in page
    assert '<option value="acme"' in page and '<option value="globex"' in page
    assert 'id="start-form"' not in viewer.get(f"/workflows/{DEMO}/").content.decode()


def test_a_valid_start_creates_the_instance_with_those_params_and_an_audit_entry(operator):
    ahead = (timezone.now() + timedelta(days=3)).replace(second=0, microsecond=0)
    status, where = _start(
        operator, id="hand-1", priority="7", tenant="globex", start_at=ahead.strftime("%Y-%m-%dT%H:%M")
    )
    assert status == 303 and where == "/instances/hand-1/"
    inst = Instance.objects.get()
    assert (inst.id, inst.workflow, inst.tenant, inst.params, inst.priority) == (
        "hand-1",
        DEMO,
        "globex",
        {"account": "acme", "limit": 5},
        7,
    )
    assert inst.ready_at is not None and inst.ready_at.replace(second=0, microsecond=0) == ahead
    entry = AuditEntry.objects.get()
    assert (entry.action, entry.actor, entry.source, entry.tenants, entry.selection) == (
        "instance.start",
        "operator",
        "web",
        ["globex"],
        {"workflow": DEMO, "instance_id": "hand-1"},
    )
    assert "Run hand-1 of dash-demo started" in operator.get(where).content.decode()


def test_without_an_id_a_new_one_is_made(operator):
    status, where = _start(operator)
    new = Instance.objects.get()
    assert status == 303 and where == f"/instances/{new.id}/" and new.tenant == "acme"


def test_every_invalid_field_is_shown_at_once_and_nothing_starts(operator):
    status, page = _start(operator, params='{"account": ', tenant="wonderland", id="-bad", priority="5000")
    assert status == 400
    assert "4 fields to correct" in page
    assert "params" in page and "not valid JSON" in page
    assert "Select a valid choice. wonderland is not one of the available choices." in page
    assert "an id is letters, digits, _ and -" in page
    assert "less than or equal to 1000" in page
    assert '{"account": ' in page  # the operator's input is kept for correcting
    assert not Instance.objects.exists() and not AuditEntry.objects.exists()


@pytest.mark.parametrize(
    ("params", "said"),
    [
        ("[1, 2]", "params must be a JSON object"),
        ('{"_schedule": {}}', "the params key '_schedule' is reserved"),
    ],
)
def test_params_that_are_not_an_object_or_set_a_reserved_key_are_refused(operator, params, said):
    status, page = _start(operator, params=params)
    assert status == 400 and said in page
    assert not Instance.objects.exists() and not AuditEntry.objects.exists()


def test_a_duplicate_id_is_refused_in_place(operator):
    assert _start(operator, id="hand-dup")[0] == 303
    status, page = _start(operator, id="hand-dup")
    assert status == 409 and "The run was not started" in page and "hand-dup" in page
    assert Instance.objects.count() == 1 and AuditEntry.objects.count() == 1


def test_a_viewer_cannot_start_and_a_viewer_of_one_tenant_cannot_start_in_it(viewer, users):
    assert _start(viewer)[0] == 403
    mixed = user_ensure(
        username="start-mixed", password="start-mixed", memberships=[("acme", Role.VIEWER), ("globex", Role.OPERATOR)]
    )
    client = Client()
    client.force_login(mixed)
    status, page = _start(client, tenant="acme")
    assert status == 400 and "acme is not one of the available choices" in page
    assert not Instance.objects.exists() and not AuditEntry.objects.exists()


def test_a_start_more_than_a_year_ahead_is_refused(operator):
    status, page = _start(operator, start_at=(timezone.now() + timedelta(days=400)).strftime("%Y-%m-%dT%H:%M"))
    assert status == 400 and "start at most 365 days ahead" in page and not Instance.objects.exists()


def test_an_unknown_workflow_has_no_start(operator):
    assert (
        operator.post("/workflows/no-such-flow/start/", {"params": "{}", "tenant": "acme", "priority": "0"}).status_code
        == 404
    )
    assert not Instance.objects.exists()


def test_a_run_starts_with_its_search_attributes_found_by_the_list_at_once(operator):
    from ingest.engine.models import InstanceAttributes

    status, where = _start(operator, id="hand-tagged", search_attributes="customer = acme\n\nbackfill=true\n")
    assert status == 303 and where == "/instances/hand-tagged/"
    assert InstanceAttributes.objects.get(instance_id="hand-tagged").attributes == {
        "customer": "acme",
        "backfill": "true",
    }
    assert AuditEntry.objects.get().selection == {
        "workflow": DEMO,
        "instance_id": "hand-tagged",
        "search_attributes": {"customer": "acme", "backfill": "true"},
    }
    listed = operator.get("/instances/", {"attr": "customer:acme"}).content.decode()
    assert "hand-tagged" in listed


def test_bad_search_attribute_lines_are_each_named_and_nothing_starts(operator):
    status, page = _start(operator, search_attributes="customer=acme\nnot a pair\nCustomer=x\ncustomer=b\nempty=")
    assert status == 400
    assert "line 2 is not key=value" in page
    assert "line 4 sets 'customer' a second time" in page
    assert "line 5 gives 'empty' no value" in page
    status, page = _start(operator, search_attributes="Customer=x")
    assert status == 400 and "search attribute key 'Customer' is not allowed" in page
    status, page = _start(operator, search_attributes="\n".join(f"k{n}=v" for n in range(21)))
    assert status == 400 and "21 search attributes given; a run has at most 20" in page
    assert not Instance.objects.exists() and not AuditEntry.objects.exists()
