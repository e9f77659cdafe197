"""Read-only admin for the ledger: the engine's services are the only writers."""

from __future__ import annotations

from typing import Any

from django.contrib import admin
from django.http import HttpRequest

from ingest.engine import models


class ReadOnly(admin.ModelAdmin):  # type: ignore[type-arg]
    """No add, change or delete: for tables only their own services write (the ledger, audit logs)."""

    def has_add_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def has_delete_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False


@admin.register(models.Instance)
class InstanceAdmin(ReadOnly):
    list_display = ("id", "workflow", "tenant", "status", "created_at", "ended_at")
    list_filter = ("status", "workflow", "tenant")
    search_fields = ("id",)
    date_hierarchy = "created_at"
    show_full_result_count = False


@admin.register(models.Step)
class StepAdmin(ReadOnly):
    list_display = ("instance", "name", "seq", "kind", "status", "attempts", "started_at", "ended_at")
    list_filter = ("status", "kind")
    search_fields = ("instance__id", "name")
    raw_id_fields = ("instance", "child")
    show_full_result_count = False


@admin.register(models.Attempt)
class AttemptAdmin(ReadOnly):
    list_display = ("step", "number", "ok", "error_name", "started_at", "retry_delay_seconds", "worker")
    list_filter = ("ok",)
    raw_id_fields = ("step",)
    show_full_result_count = False


@admin.register(models.History)
class HistoryAdmin(ReadOnly):
    list_display = ("id", "created_at", "kind", "instance", "step_name", "status", "actor")
    list_filter = ("kind",)
    search_fields = ("instance__id", "actor")
    raw_id_fields = ("instance",)
    show_full_result_count = False


@admin.register(models.PendingEvent)
class PendingEventAdmin(ReadOnly):
    list_display = ("instance", "type", "created_at", "consumed_at")
    raw_id_fields = ("instance", "consumed_by")


@admin.register(models.DeadLetter)
class DeadLetterAdmin(ReadOnly):
    list_display = ("instance", "workflow", "step_name", "error_name", "state", "created_at")
    list_filter = ("state", "workflow")
    raw_id_fields = ("instance",)


@admin.register(models.ApiCost)
class ApiCostAdmin(ReadOnly):
    list_display = ("created_at", "service", "cost", "workflow_type", "step_name", "attempt", "success", "tenant")
    list_filter = ("service", "success", "tenant")
    raw_id_fields = ("instance",)
    show_full_result_count = False


@admin.register(models.Budget)
class BudgetAdmin(ReadOnly):
    list_display = ("scope", "key", "period", "limit", "spent", "reserved", "policy", "enabled")


@admin.register(models.BudgetReservation)
class BudgetReservationAdmin(ReadOnly):
    list_display = ("budget", "instance", "step_name", "amount", "actual", "state", "created_at")
    raw_id_fields = ("instance",)


@admin.register(models.ApprovalRequest)
class ApprovalRequestAdmin(ReadOnly):
    list_display = ("title", "instance", "kind", "state", "due_at", "answered_by")
    list_filter = ("state", "kind")
    raw_id_fields = ("instance",)
