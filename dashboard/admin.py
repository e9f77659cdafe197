"""Django admin (the admin role): manage who belongs to which tenant with which role."""

from __future__ import annotations

from django.contrib import admin

from dashboard.models import Membership


@admin.register(Membership)
class MembershipAdmin(admin.ModelAdmin):  # type: ignore[type-arg]  # generic in django-stubs only: ModelAdmin[X] fails at runtime
    list_display = ("user", "tenant", "role", "created_at")
    list_filter = ("role", "tenant")
    search_fields = ("user__username", "tenant")
    autocomplete_fields = ("user",)
