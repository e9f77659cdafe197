"""The approvals inbox: forms built from the request's schema, validation, answers through
approval_answer, and the refusal of a second answer; from the three sides."""

from __future__ import annotations

from datetime import timedelta
from decimal import Decimal

import pytest
from test_ops_factories import approval, budget, now

from ingest.engine.models import ApprovalRequest, BudgetGrant, PendingEvent

pytestmark = pytest.mark.db

FIELDS = [
    {"name": "facts", "label": "Facts to publish", "type": "number", "required": True, "default": 4},
    {"name": "channel", "label": "Channel", "type": "choice", "required": True, "choices": ["crm", "slack"]},
    {"name": "notify", "label": "Notify the owner", "type": "boolean", "default": True},
    {"name": "note", "label": "Note for the account team", "type": "textarea"},
    {"name": "ticket", "label": "Ticket", "type": "text", "required": False},
]


def test_the_inbox_lists_pending_requests_of_my_tenants_with_due_time(operator, stranger):
    soon = approval(tenant="acme", title="Publish facts?", due_in=timedelta(hours=1))
    late = approval(tenant="globex", title="Overdue one", due_in=timedelta(hours=-1))
    approval(tenant="initech", title="Initech only")
    approval(tenant="acme", title="Done already", state="approved", answered_by="someone", answered_at=now())
    r = operator.get("/approvals/")
    assert [a.id for a in r.context["pending"]] == [late.id, soon.id]  # by due time
    html = r.content.decode()
    assert "Publish facts?" in html and "(overdue)" in html and "Initech only" not in html
    assert "senior-manager after 48 h" in html
    assert [a.title for a in r.context["recent"]] == ["Done already"]
    assert [a.title for a in stranger.get("/approvals/").context["pending"]] == ["Initech only"]
    assert stranger.get(f"/approvals/{soon.id}/").status_code == 404


def test_the_form_is_built_from_the_schema(viewer, operator):
    req = approval(fields=FIELDS)
    r = operator.get(f"/approvals/{req.id}/")
    form = r.context["form"]
    assert [f.name for f in form.schema_fields()] == ["f_facts", "f_channel", "f_notify", "f_note", "f_ticket"]
    html = r.content.decode()
    assert 'type="number" name="f_facts" value="4"' in html
    assert '<option value="slack">slack</option>' in html and "<textarea" in html
    assert 'type="checkbox" name="f_notify"' in html and "checked" in html
    assert "Approve" in html and "Reject" in html
    v = viewer.get(f"/approvals/{req.id}/").content.decode()
    assert "needs the operator role" in v and 'value="approve"' not in v


def test_answers_are_validated_against_the_schema(operator):
    req = approval(fields=FIELDS)
    r = operator.post(f"/approvals/{req.id}/answer/", {"decision": "approve", "f_facts": "many", "f_channel": "fax"})
    assert r.status_code == 400
    errors = r.context["form"].errors
    assert "f_facts" in errors and "f_channel" in errors
    req.refresh_from_db()
    assert req.state == "pending"


def test_approving_sends_the_typed_values_to_the_waiting_instance(operator):
    req = approval(fields=FIELDS)
    r = operator.post(
        f"/approvals/{req.id}/answer/",
        {
            "decision": "approve",
            "f_facts": "3",
            "f_channel": "slack",
            "f_notify": "on",
            "comment": "looks right",
        },
    )
    assert r.status_code == 302
    req.refresh_from_db()
    assert req.state == "approved" and req.answered_by == "operator"
    assert req.answer["values"] == {"facts": 3, "channel": "slack", "notify": True, "note": "", "ticket": ""}
    event = PendingEvent.objects.get(instance_id=req.instance_id)
    assert event.type == "approval" and event.payload["approved"] is True and event.payload["comment"] == "looks right"


def test_rejecting_needs_no_values(operator):
    req = approval(fields=FIELDS)
    r = operator.post(f"/approvals/{req.id}/answer/", {"decision": "reject", "comment": "wrong account"})
    assert r.status_code == 302
    req.refresh_from_db()
    assert req.state == "rejected"


def test_a_second_answer_is_refused_clearly_never_a_500(operator):
    req = approval(fields=[])
    operator.post(f"/approvals/{req.id}/answer/", {"decision": "approve"})
    r = operator.post(f"/approvals/{req.id}/answer/", {"decision": "reject"})
    assert r.status_code == 409
    assert "already approved by operator" in r.content.decode()
    req.refresh_from_db()
    assert req.state == "approved"


def test_an_expired_request_is_refused_with_the_engines_message(operator):
    req = approval(fields=[], due_in=timedelta(minutes=-5))
    r = operator.post(f"/approvals/{req.id}/answer/", {"decision": "approve"})
    assert r.status_code == 409
    assert "expired" in r.content.decode()
    req.refresh_from_db()
    assert req.answered_by == "" and req.answer is None


def test_viewers_and_strangers_cannot_answer(viewer, stranger):
    req = approval(fields=[])
    assert viewer.post(f"/approvals/{req.id}/answer/", {"decision": "approve"}).status_code == 403
    assert stranger.post(f"/approvals/{req.id}/answer/", {"decision": "approve"}).status_code == 404
    assert ApprovalRequest.objects.get(id=req.id).state == "pending"


def test_approving_a_budget_breach_grants_the_amount_once(operator):
    b = budget(key="acme", limit="1", spent="0.95", policy="approval")
    req = approval(
        kind="budget",
        title="Budget acme/day exceeded",
        budget=b,
        requested_amount=Decimal("0.5"),
        fields=[{"name": "amount", "label": "Grant", "type": "number", "required": True, "default": "0.5"}],
    )
    html = operator.get(f"/approvals/{req.id}/").content.decode()
    assert "$0.9500 spent of $1.00" in html and "$0.5000" in html
    operator.post(f"/approvals/{req.id}/answer/", {"decision": "approve", "f_amount": "0.75"})
    grant = BudgetGrant.objects.get(budget=b)
    assert grant.amount == Decimal("0.75") and grant.granted_by == "operator"


@pytest.mark.parametrize("amount", ["-0.5", "0"])
def test_a_budget_grant_that_is_not_positive_is_a_field_error_not_a_conflict(operator, amount):
    b = budget(key="acme", limit="1", spent="0.95", policy="approval")
    req = approval(
        kind="budget",
        title="Budget acme/day exceeded",
        budget=b,
        requested_amount=Decimal("0.5"),
        fields=[{"name": "amount", "label": "Grant", "type": "number", "required": True}],
    )
    response = operator.post(f"/approvals/{req.id}/answer/", {"decision": "approve", "f_amount": amount})
    assert response.status_code == 400
    assert "must be positive" in " ".join(response.context["form"].errors["f_amount"])
    assert not BudgetGrant.objects.filter(budget=b).exists()
    assert ApprovalRequest.objects.get(id=req.id).state == "pending"
