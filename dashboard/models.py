"""The dashboard's own tables: who may see and act on which tenant."""

from __future__ import annotations

from django.conf import settings
from django.db import models


class Role(models.TextChoices):
    """Ordered from least to most rights; `dashboard.access.ROLE_RANK` relies on that order."""

    VIEWER = "viewer", "viewer (read only)"
    OPERATOR = "operator", "operator (actions, approvals, budgets)"
    ADMIN = "admin", "admin (operator + Django admin)"


class Membership(models.Model):
    """A user's role in one tenant. A user sees only the tenants they are a member of."""

    user = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="memberships"
    )
    tenant = models.CharField(max_length=100)
    role = models.CharField(max_length=10, choices=Role.choices, default=Role.VIEWER)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["user", "tenant"], name="membership_user_tenant"),
        ]
        indexes = [models.Index(fields=["tenant"], name="membership_tenant")]

    def __str__(self) -> str:
        return f"{self.user_id}@{self.tenant} ({self.role})"
