"""Operations pages: overview, workflow DAG, dead letters, domains, costs, URL classifications,
budgets, circuit breakers, approvals, audit, alerts."""

from __future__ import annotations

from django.urls import path

from dashboard.views import (
    alerts,
    approvals,
    audit,
    breakers,
    budgets,
    classifications,
    costs,
    dead_letters,
    domains,
    overview,
    workflows,
)

app_name = "ops"

urlpatterns = [
    path("", overview.overview, name="overview"),
    path("workflows/", workflows.workflows, name="workflows"),
    path("workflows/<str:name>/", workflows.workflow_dag, name="workflow"),
    path("workflows/<str:name>/start/", workflows.workflow_start, name="workflow_start"),
    path("workflows/<str:name>/versions/<int:version>/retire/", workflows.workflow_version_retire_view,
         name="workflow_version_retire"),
    path("dead-letters/", dead_letters.dead_letters, name="dead_letters"),
    path("dead-letters/redrive/", dead_letters.dead_letter_redrive_preview, name="redrive_preview"),
    path("dead-letters/redrive/run/", dead_letters.dead_letter_redrive, name="redrive"),
    path("dead-letters/<int:dl_id>/", dead_letters.dead_letter_detail, name="dead_letter"),
    path("dead-letters/<int:dl_id>/retry/", dead_letters.dead_letter_retry, name="dead_letter_retry"),
    path("dead-letters/<int:dl_id>/discard/", dead_letters.dead_letter_discard, name="dead_letter_discard"),
    path("dead-letters/<int:dl_id>/replay/", dead_letters.dead_letter_replay_form, name="dead_letter_replay_form"),
    path("dead-letters/<int:dl_id>/replay/run/", dead_letters.dead_letter_replay, name="dead_letter_replay"),
    path("domains/", domains.domains, name="domains"),
    path("domains/<int:domain_id>/", domains.domain_detail, name="domain"),
    path("costs/", costs.costs, name="costs"),
    path("costs/export.csv", costs.costs_export, name="costs_export"),
    path("classifications/", classifications.classifications, name="classifications"),
    path("budgets/", budgets.budgets, name="budgets"),
    path("budgets/new/", budgets.budget_form, name="budget_new"),
    path("budgets/<int:budget_id>/edit/", budgets.budget_form, name="budget_edit"),
    path("budgets/save/", budgets.budget_save, name="budget_save"),
    path("breakers/", breakers.breakers, name="breakers"),
    path("breakers/reset/", breakers.breaker_reset, name="breaker_reset"),
    path("breakers/<path:key>/", breakers.breaker_detail, name="breaker"),
    path("approvals/", approvals.approvals, name="approvals"),
    path("approvals/<int:approval_id>/", approvals.approval_detail, name="approval"),
    path("approvals/<int:approval_id>/answer/", approvals.approval_answer, name="approval_answer"),
    path("audit/", audit.audit, name="audit"),
    path("alerts/", alerts.alerts, name="alerts"),
    path("alerts/notifications/", alerts.notifications, name="notifications"),
    path("alerts/rules/new/", alerts.rule_form, name="alert_rule_new"),
    path("alerts/rules/create/", alerts.rule_save, name="alert_rule_create"),
    path("alerts/rules/<int:rule_id>/edit/", alerts.rule_form, name="alert_rule_edit"),
    path("alerts/rules/<int:rule_id>/save/", alerts.rule_save, name="alert_rule_update"),
    path("alerts/rules/<int:rule_id>/toggle/", alerts.rule_toggle, name="alert_rule_toggle"),
    path("alerts/channels/new/", alerts.channel_form, name="alert_channel_new"),
    path("alerts/channels/create/", alerts.channel_save, name="alert_channel_create"),
    path("alerts/channels/<int:channel_id>/edit/", alerts.channel_form, name="alert_channel_edit"),
    path("alerts/channels/<int:channel_id>/save/", alerts.channel_save, name="alert_channel_update"),
    path("alerts/channels/<int:channel_id>/toggle/", alerts.channel_toggle, name="alert_channel_toggle"),
    path("alerts/channels/<int:channel_id>/test/", alerts.channel_send_test, name="alert_channel_test"),
]
