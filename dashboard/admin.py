"""Django admin (the admin role): manage who belongs to which tenant with which role."""

from __future__ import annotations

from django.contrib import admin

from dashboard.models import Membership

# ModelAdmin is generic only in django-stubs: ModelAdmin[Membership] would fail at run time (without
# django-stubs-ext's monkeypatch, which is not a runtime dependency), hence the type-arg ignore.


@admin.register(Membership)
class MembershipAdmin(admin.ModelAdmin):  # type: ignore[type-arg]
    list_display = ("user", "tenant", "role", "created_at")
    list_filter = ("role", "tenant")
    search_fields = ("user__username", "tenant")
    autocomplete_fields = ("user",)
