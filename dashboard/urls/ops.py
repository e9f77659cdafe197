"""Operations pages: overview, workflow DAG, dead letters, costs, budgets, approvals, audit."""

from __future__ import annotations

from django.urls import path

from dashboard.views import approvals, audit, budgets, costs, dead_letters, overview, workflows

app_name = "ops"

urlpatterns = [
    path("", overview.overview, name="overview"),
    path("workflows/", workflows.workflows, name="workflows"),
    path("workflows/<str:name>/", workflows.workflow_dag, name="workflow"),
    path("dead-letters/", dead_letters.dead_letters, name="dead_letters"),
    path("dead-letters/redrive/", dead_letters.dead_letter_redrive_preview, name="redrive_preview"),
    path("dead-letters/redrive/run/", dead_letters.dead_letter_redrive, name="redrive"),
    path("dead-letters/<int:dl_id>/", dead_letters.dead_letter_detail, name="dead_letter"),
    path("dead-letters/<int:dl_id>/retry/", dead_letters.dead_letter_retry, name="dead_letter_retry"),
    path("dead-letters/<int:dl_id>/discard/", dead_letters.dead_letter_discard, name="dead_letter_discard"),
    path("dead-letters/<int:dl_id>/replay/", dead_letters.dead_letter_replay_form, name="dead_letter_replay_form"),
    path("dead-letters/<int:dl_id>/replay/run/", dead_letters.dead_letter_replay, name="dead_letter_replay"),
    path("costs/", costs.costs, name="costs"),
    path("costs/export.csv", costs.costs_export, name="costs_export"),
    path("budgets/", budgets.budgets, name="budgets"),
    path("budgets/new/", budgets.budget_form, name="budget_new"),
    path("budgets/<int:budget_id>/edit/", budgets.budget_form, name="budget_edit"),
    path("budgets/save/", budgets.budget_save, name="budget_save"),
    path("approvals/", approvals.approvals, name="approvals"),
    path("approvals/<int:approval_id>/", approvals.approval_detail, name="approval"),
    path("approvals/<int:approval_id>/answer/", approvals.approval_answer, name="approval_answer"),
    path("audit/", audit.audit, name="audit"),
]
