"""Writes of the triggers app, one module per concept; import them from here.

Every function is `<entity>_<verb>` with keyword-only arguments.
"""

from __future__ import annotations

from ingest.triggers.services.coalesce import Coalesced, coalesce_add, coalesce_windows_sweep
from ingest.triggers.services.credentials import (
    ingress_secret_create,
    ingress_secret_delete,
    ingress_secret_problems,
    ingress_secret_rotate,
    ingress_secret_set_enabled,
    ingress_secrets_expire,
    rotation_problems,
)
from ingest.triggers.services.events import event_publish
from ingest.triggers.services.ingress import (
    idempotency_keys_purge,
    route_coalesce_set,
    route_trigger,
    route_upsert,
)
from ingest.triggers.services.ratelimits import (
    rate_limit_acquire,
    rate_limit_configure,
    rate_limit_penalize,
    rate_limits_take,
)
from ingest.triggers.services.routes import (
    route_create,
    route_delete,
    route_problems,
    route_set_enabled,
    route_update,
)
from ingest.triggers.services.schedules import (
    schedule_create,
    schedule_create_from,
    schedule_delete,
    schedule_fire_due,
    schedule_name_check,
    schedule_problems,
    schedule_run_now,
    schedule_set_enabled,
    schedule_update,
)
from ingest.triggers.services.starts import Triggered
from ingest.triggers.services.subscriptions import (
    subscription_coalesce_set,
    subscription_create,
    subscription_delete,
    subscription_problems,
    subscription_set_enabled,
    subscription_update,
)
from ingest.triggers.services.tokens import (
    api_token_authenticate,
    api_token_create,
    api_token_expiry,
    api_token_revoke,
)

__all__ = [
    "Coalesced",
    "coalesce_add",
    "coalesce_windows_sweep",
    "Triggered",
    "api_token_authenticate",
    "api_token_create",
    "api_token_expiry",
    "api_token_revoke",
    "event_publish",
    "idempotency_keys_purge",
    "ingress_secret_create",
    "ingress_secret_delete",
    "ingress_secret_problems",
    "ingress_secret_rotate",
    "ingress_secret_set_enabled",
    "ingress_secrets_expire",
    "rate_limit_acquire",
    "rate_limit_configure",
    "rate_limit_penalize",
    "rate_limits_take",
    "route_coalesce_set",
    "route_create",
    "route_delete",
    "route_problems",
    "route_set_enabled",
    "route_trigger",
    "route_update",
    "route_upsert",
    "rotation_problems",
    "schedule_create",
    "schedule_create_from",
    "schedule_delete",
    "schedule_fire_due",
    "schedule_name_check",
    "schedule_problems",
    "schedule_run_now",
    "schedule_set_enabled",
    "schedule_update",
    "subscription_coalesce_set",
    "subscription_create",
    "subscription_delete",
    "subscription_problems",
    "subscription_set_enabled",
    "subscription_update",
]
