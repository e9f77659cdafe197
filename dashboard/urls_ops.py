"""Operations pages: overview, workflow DAG, dead letters, costs, budgets, approvals."""

from __future__ import annotations

from django.urls import path

from dashboard.views import ops

app_name = "ops"

urlpatterns = [
    path("", ops.overview, name="overview"),
    path("workflows/", ops.workflows, name="workflows"),
    path("workflows/<str:name>/", ops.workflow_dag, name="workflow"),
    path("dead-letters/", ops.dead_letters, name="dead_letters"),
    path("dead-letters/redrive/", ops.dead_letter_redrive_preview, name="redrive_preview"),
    path("dead-letters/redrive/run/", ops.dead_letter_redrive, name="redrive"),
    path("dead-letters/<int:dl_id>/", ops.dead_letter_detail, name="dead_letter"),
    path("dead-letters/<int:dl_id>/retry/", ops.dead_letter_retry, name="dead_letter_retry"),
    path("dead-letters/<int:dl_id>/discard/", ops.dead_letter_discard, name="dead_letter_discard"),
    path("dead-letters/<int:dl_id>/replay/", ops.dead_letter_replay_form, name="dead_letter_replay_form"),
    path("dead-letters/<int:dl_id>/replay/run/", ops.dead_letter_replay, name="dead_letter_replay"),
    path("costs/", ops.costs, name="costs"),
    path("costs/export.csv", ops.costs_export, name="costs_export"),
    path("budgets/", ops.budgets, name="budgets"),
    path("budgets/new/", ops.budget_form, name="budget_new"),
    path("budgets/<int:budget_id>/edit/", ops.budget_form, name="budget_edit"),
    path("budgets/save/", ops.budget_save, name="budget_save"),
    path("approvals/", ops.approvals, name="approvals"),
    path("approvals/<int:approval_id>/", ops.approval_detail, name="approval"),
    path("approvals/<int:approval_id>/answer/", ops.approval_answer, name="approval_answer"),
]
