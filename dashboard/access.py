"""Who may see and do what. Every view, selector and consumer goes through these helpers.

Rules: a user sees a tenant's instances, costs, approvals and live events only as a member of
that tenant; a viewer reads, an operator (or admin) of that tenant acts. Objects of tenants the
user is not a member of are reported as missing (404), never as forbidden, so ids do not leak.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from functools import wraps
from typing import Any, TypeVar, cast

from django.contrib.auth import get_user_model
from django.contrib.auth.views import redirect_to_login
from django.core.exceptions import PermissionDenied
from django.db import transaction
from django.db.models import Model, QuerySet
from django.http import HttpRequest
from django.http.response import HttpResponseBase

from dashboard.models import Membership, Role

ROLE_RANK = {Role.VIEWER.value: 1, Role.OPERATOR.value: 2, Role.ADMIN.value: 3}
_CACHE_ATTR = "_runledger_memberships"

V = TypeVar("V", bound=Callable[..., HttpResponseBase])
M = TypeVar("M", bound=Model)


def memberships_for(user: Any) -> dict[str, str]:
    """{tenant: role} for an active user (memoised on the user object for the request)."""
    if user is None or not getattr(user, "is_authenticated", False) or not user.is_active:
        return {}
    cached = getattr(user, _CACHE_ATTR, None)
    if cached is None:
        cached = dict(Membership.objects.filter(user=user).values_list("tenant", "role"))
        setattr(user, _CACHE_ATTR, cached)
    return cached


def tenants_for(user: Any) -> list[str]:
    """The tenants this user may read, sorted. Empty for anonymous or inactive users."""
    return sorted(memberships_for(user))


def role_for(user: Any, tenant: str) -> str | None:
    return memberships_for(user).get(tenant)


def has_role(user: Any, tenant: str, role: str) -> bool:
    current = role_for(user, tenant)
    return current is not None and ROLE_RANK[current] >= ROLE_RANK[role]


def can_read(user: Any, tenant: str) -> bool:
    return role_for(user, tenant) is not None


def can_act(user: Any, tenant: str) -> bool:
    """Operators and admins of `tenant` may pause, retry, replay, answer approvals, edit budgets."""
    return has_role(user, tenant, Role.OPERATOR)


def acting_tenants(user: Any) -> list[str]:
    return sorted(t for t in memberships_for(user) if can_act(user, t))


def sees_global(user: Any) -> bool:
    """Staff read what belongs to no tenant (global budgets, subscriptions for every tenant)."""
    return bool(getattr(user, "is_superuser", False) or getattr(user, "is_staff", False))


def can_act_subscription(user: Any, tenant: str) -> bool:
    """A subscription of one tenant: its operators. One for every tenant's events (tenant ""): a
    global setting, for staff who operate somewhere."""
    if tenant:
        return can_act(user, tenant)
    return sees_global(user) and bool(acting_tenants(user))


def scope(queryset: QuerySet[M], user: Any, *, field: str = "tenant") -> QuerySet[M]:
    """Restrict a queryset to the user's tenants (empty for a user without any)."""
    return queryset.filter(**{f"{field}__in": tenants_for(user)})


def require_role(role: str = Role.VIEWER) -> Callable[[V], V]:
    """View decorator: anonymous users go to the login page; users without `role` in any tenant
    get 403. Per-object checks (this instance's tenant) stay in the view: `can_act`."""

    def decorator(view: V) -> V:
        @wraps(view)
        def wrapped(request: HttpRequest, *args: Any, **kwargs: Any) -> HttpResponseBase:
            user = request.user
            if not user.is_authenticated:
                return redirect_to_login(request.get_full_path())
            if not any(ROLE_RANK[r] >= ROLE_RANK[role] for r in memberships_for(user).values()):
                raise PermissionDenied(f"this page needs the {role} role in at least one tenant")
            return view(request, *args, **kwargs)

        return cast(V, wrapped)

    return decorator


def user_ensure(
    *,
    username: str,
    password: str,
    memberships: Iterable[tuple[str, str]],
    staff: bool = False,
    superuser: bool = False,
) -> Any:
    """Create or update a user with exactly these (tenant, role) memberships. Used for demo data.
    A superuser holds every permission in the Django admin; staff alone only lets one log in there."""
    User = get_user_model()
    with transaction.atomic():
        user, _ = User.objects.get_or_create(username=username)
        user.set_password(password)
        user.is_staff = staff or superuser or any(role == Role.ADMIN for _, role in memberships)
        user.is_superuser = superuser
        user.is_active = True
        user.save()
        wanted = dict(memberships)
        Membership.objects.filter(user=user).exclude(tenant__in=list(wanted)).delete()
        for tenant, role in wanted.items():
            Membership.objects.update_or_create(user=user, tenant=tenant, defaults={"role": role})
    return user


DEMO_USERS: list[dict[str, Any]] = [
    {
        "username": "operator",
        "password": "operator",
        "memberships": [("acme", Role.OPERATOR), ("globex", Role.OPERATOR), ("default", Role.OPERATOR)],
    },
    {"username": "viewer", "password": "viewer", "memberships": [("acme", Role.VIEWER)]},
    {"username": "stranger", "password": "stranger", "memberships": [("initech", Role.OPERATOR)]},
    {
        "username": "admin",
        "password": "admin",
        "staff": True,
        "superuser": True,
        "memberships": [("acme", Role.ADMIN), ("globex", Role.ADMIN), ("default", Role.ADMIN), ("initech", Role.ADMIN)],
    },
]


def demo_users_ensure() -> list[Any]:
    return [user_ensure(**spec) for spec in DEMO_USERS]
