"""Every runs view and action from the three sides: operator (acts), viewer (reads acme),
stranger (operator of initech only). Refusals change nothing."""

from __future__ import annotations

import pytest
from ledger_factories import add_history, make_instance
from workflows_for_tests import DEMO

from dashboard.access import can_act, tenants_for
from ingest.engine.models import History, Instance, PendingEvent

pytestmark = pytest.mark.db

ACTIONS = ["pause", "resume", "terminate", "restart", "retry", "replay", "event"]


@pytest.fixture
def acme():
    inst = make_instance("acme-run-1", tenant="acme", workflow=DEMO, status="running")
    add_history(inst, "instance.created")
    return inst


def test_demo_users_have_the_documented_tenants_and_roles(users, django_user_model):
    op = django_user_model.objects.get(username="operator")
    assert tenants_for(op) == ["acme", "default", "globex"]
    assert can_act(op, "acme") and not can_act(op, "initech")
    viewer = django_user_model.objects.get(username="viewer")
    assert tenants_for(viewer) == ["acme"] and not can_act(viewer, "acme")
    stranger = django_user_model.objects.get(username="stranger")
    assert tenants_for(stranger) == ["initech"]


@pytest.mark.parametrize("url", ["/instances/", "/instances/acme-run-1/"])
def test_operator_and_viewer_read_their_tenant_pages(operator, viewer, acme, url):
    assert operator.get(url).status_code == 200
    assert viewer.get(url).status_code == 200


def test_a_stranger_gets_404_for_another_tenants_instance(stranger, acme):
    assert stranger.get("/instances/acme-run-1/").status_code == 404


def test_the_list_shows_only_the_users_tenants(operator, viewer, stranger, acme):
    make_instance("globex-run-1", tenant="globex", workflow=DEMO)
    make_instance("initech-run-1", tenant="initech", workflow=DEMO)
    op_html = operator.get("/instances/").content.decode()
    assert "acme-run-1" in op_html and "globex-run-1" in op_html and "initech-run-1" not in op_html
    v_html = viewer.get("/instances/").content.decode()
    assert "acme-run-1" in v_html and "globex-run-1" not in v_html
    s_html = stranger.get("/instances/").content.decode()
    assert "initech-run-1" in s_html and "acme-run-1" not in s_html
    # Asking for a tenant you are not in shows nothing rather than widening the scope.
    assert "acme-run-1" not in stranger.get("/instances/?tenant=acme").content.decode()


def test_only_operators_see_action_buttons(operator, viewer, acme):
    assert "/instances/acme-run-1/actions/pause/" in operator.get("/instances/acme-run-1/").content.decode()
    html = viewer.get("/instances/acme-run-1/").content.decode()
    assert "/actions/" not in html and "Read only" in html


@pytest.mark.parametrize("action", ACTIONS)
def test_the_operator_gets_the_confirmation_of_every_action(operator, acme, action):
    r = operator.get(f"/instances/acme-run-1/actions/{action}/")
    assert r.status_code == 200
    assert "What will happen" in r.content.decode()


@pytest.mark.parametrize("action", ACTIONS)
def test_a_viewer_is_refused_every_action_and_nothing_changes(viewer, acme, action):
    before = History.objects.count()
    assert viewer.get(f"/instances/acme-run-1/actions/{action}/").status_code == 403
    r = viewer.post(
        f"/instances/acme-run-1/actions/{action}/run/",
        {"reason": "try", "type": "x", "params": "{}", "confirm": "True"},
    )
    assert r.status_code == 403
    assert History.objects.count() == before
    assert Instance.objects.get(id="acme-run-1").status == "running"
    assert Instance.objects.count() == 1 and PendingEvent.objects.count() == 0


@pytest.mark.parametrize("action", ACTIONS)
def test_a_stranger_is_told_the_instance_does_not_exist_and_nothing_changes(stranger, acme, action):
    before = History.objects.count()
    assert stranger.get(f"/instances/acme-run-1/actions/{action}/").status_code == 404
    r = stranger.post(
        f"/instances/acme-run-1/actions/{action}/run/",
        {"reason": "try", "type": "x", "params": "{}", "confirm": "True"},
    )
    assert r.status_code == 404
    assert History.objects.count() == before
    assert Instance.objects.get(id="acme-run-1").status == "running"
    assert Instance.objects.count() == 1


def test_a_viewer_of_acme_cannot_act_even_with_operator_rights_elsewhere(client, users, acme, django_user_model):
    from dashboard.models import Membership

    user = django_user_model.objects.get(username="viewer")
    Membership.objects.create(user=user, tenant="globex", role="operator")
    client.login(username="viewer", password="viewer")
    r = client.post("/instances/acme-run-1/actions/pause/run/", {"reason": "x"})
    assert r.status_code == 403
    assert Instance.objects.get(id="acme-run-1").status == "running"


def test_actions_need_post_and_a_csrf_token(users, acme):
    from django.test import Client

    strict = Client(enforce_csrf_checks=True)
    strict.login(username="operator", password="operator")
    assert strict.post("/instances/acme-run-1/actions/pause/run/", {"reason": "x"}).status_code == 403
    assert Instance.objects.get(id="acme-run-1").status == "running"
    assert strict.get("/instances/acme-run-1/actions/pause/run/").status_code == 405
