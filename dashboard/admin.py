"""Django admin (the admin role): manage who belongs to which tenant with which role; read the
audit log (nobody edits or deletes it here)."""

from __future__ import annotations

from django.contrib import admin

from dashboard.models import AuditEntry, Membership
from ingest.engine import ReadOnly

# ModelAdmin is generic only in django-stubs: ModelAdmin[Membership] would fail at run time (without
# django-stubs-ext's monkeypatch, which is not a runtime dependency), hence the type-arg ignore.


@admin.register(Membership)
class MembershipAdmin(admin.ModelAdmin):  # type: ignore[type-arg]
    list_display = ("user", "tenant", "role", "created_at")
    list_filter = ("role", "tenant")
    search_fields = ("user__username", "tenant")
    autocomplete_fields = ("user",)


@admin.register(AuditEntry)
class AuditEntryAdmin(ReadOnly):
    list_display = ("created_at", "actor", "action", "affected", "source", "ip")
    list_filter = ("action", "source")
    search_fields = ("actor", "action", "reason")
