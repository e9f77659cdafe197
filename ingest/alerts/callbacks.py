"""Instance callbacks (webhooks out, so a caller learns an outcome without polling): a route, a REST start or an
instance carries a URL; when the instance ends, its outcome and output are POSTed there, signed with the tenant's
ingress secret exactly as our ingress verifies requests, by a `callback-deliver` instance.

Registering and the instance's end may race (a sync route's instance can finish before its
callback row commits). Both sides start the delivery under a deterministic instance id: the
follower when it reads the end and finds the row, `callback_register` when it finds the
instance already ended. Whichever comes second gets InstanceAlreadyExists; neither is missed,
since the register commits its row before it reads the status.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable
from datetime import datetime

from django.db import IntegrityError, transaction

from ingest.alerts.conditions import COMPLETED_WITH_ERRORS
from ingest.alerts.errors import CallbackConflict, InvalidCallback
from ingest.alerts.models import Callback, CallbackSource, DeliveryState, RouteCallback
from ingest.engine import ByVendor, InstanceAlreadyExists, prepared_row
from ingest.engine.models import FINISHED_STATUSES, Instance
from ingest.engine.services.instances import instance_create
from ingest.sources.notify import url_problem
from ingest.triggers.models import IngressSecret

DELIVER_WORKFLOW = "callback-deliver"


def tenant_signing_secrets(tenant: str, *, now: datetime) -> list[str]:
    """What a callback is signed with: the newest enabled ingress secret of the tenant and, while
    the overlap of its last rotation lasts, the secret it replaced, so a receiver that has not
    moved to the new secret yet still verifies it (empty: nothing to sign with)."""
    row = (
        IngressSecret.objects.filter(tenant=tenant, enabled=True)
        .order_by("-created_at", "-id")
        .values_list("hmac_secret", "previous_hmac_secret", "previous_valid_until")
        .first()
    )
    if row is None:
        return []
    current, previous, until = row
    return [current, previous] if previous and until is not None and until > now else [current]


def delivery_id(instance_id: str) -> str:
    name = f"cb-{instance_id}"
    return name if len(name) <= 100 else f"cb-{hashlib.sha256(instance_id.encode()).hexdigest()[:40]}"


def url_checked(url: str) -> str:
    if not isinstance(url, str) or len(url) > 2000 or (problem := url_problem(url)):
        raise InvalidCallback(
            f"callback URL: {problem if isinstance(url, str) and len(url) <= 2000 else 'at most 2000 characters'}"
        )
    return url.strip()


def route_callback_set(*, route: str, url: str | None, now: datetime) -> RouteCallback | None:
    """Set (or with None clear) the callback URL every instance of the route carries."""
    if not url:
        RouteCallback.objects.filter(route=route).delete()
        return None
    found, _ = RouteCallback.objects.update_or_create(
        route=route, defaults={"url": url_checked(url), "created_at": now}
    )
    return found


_ROUTE_CALLBACK = f"SELECT url FROM {RouteCallback._meta.db_table} WHERE route = %s"
# The same, for the ingress's creating statement to read with the instance it inserts
# (`route_trigger(also=...)`): no query of its own per request.
ROUTE_CALLBACK_ALSO = f"SELECT url FROM {RouteCallback._meta.db_table} WHERE route = %(g_name)s"


def route_callback_url(route: str) -> str | None:
    # Asked on every request a route starts an instance for (the route is unique).
    return _route_callback_url()(route)


def _route_callback_prepared(route: str) -> str | None:
    row = prepared_row(_ROUTE_CALLBACK, [route])
    return None if row is None else str(row[0])


def _route_callback_orm(route: str) -> str | None:
    return RouteCallback.objects.filter(route=route).values_list("url", flat=True).first()


_route_callback_url = ByVendor[Callable[[str], str | None]](
    postgresql=_route_callback_prepared, sqlite=_route_callback_orm
)


def callback_register(
    *, instance_id: str, tenant: str, url: str, source: str = CallbackSource.API, now: datetime
) -> Callback:
    """Attach a callback to an instance (one per instance; a second one replaces a pending one)."""
    url = url_checked(url)
    if source not in CallbackSource.values:
        raise InvalidCallback(f"source {source!r} is unknown")
    if not IngressSecret.objects.filter(tenant=tenant, enabled=True).exists():  # nothing to sign with
        raise CallbackConflict(
            f"tenant {tenant!r} has no enabled ingress secret to sign callbacks with; "
            "an operator makes one with New credential on the console's routes page (/routes/) "
            "or POST /api/ingress-credentials; verify callbacks with its HMAC secret"
        )
    try:
        with transaction.atomic():
            callback, _ = Callback.objects.update_or_create(
                instance_id=instance_id,
                state=DeliveryState.PENDING,
                delivery_instance_id="",
                defaults={"tenant": tenant, "url": url, "source": source, "created_at": now},
            )
    except IntegrityError:
        raise CallbackConflict(f"instance {instance_id} has already ended and its callback was sent") from None
    status = Instance.objects.filter(id=instance_id).values_list("status", flat=True).first()
    if status in FINISHED_STATUSES or status == COMPLETED_WITH_ERRORS:
        callback_start(instance_id=instance_id)
    return callback


def callback_start(*, instance_id: str) -> str | None:
    """Start the delivery of an ended instance's callback, if it has one; its delivery id."""
    callback = Callback.objects.filter(instance_id=instance_id).first()
    if callback is None:
        return None
    name = delivery_id(instance_id)
    try:
        with transaction.atomic():
            instance_create(
                workflow=DELIVER_WORKFLOW,
                id=name,
                params={"callback": callback.id},
                tenant=callback.tenant,
                actor="callbacks",
            )
            Callback.objects.filter(id=callback.id).update(delivery_instance_id=name)
    except InstanceAlreadyExists:
        pass
    return name


def route_callback_attach(
    *, route: str, instance_id: str, now: datetime, url: str | None = None, url_read: bool = False
) -> Callback | None:
    """The route's callback URL, if it has one, on an instance its request just started
    (`url_read`: `url` is the route's, read with the instance, else it is asked for)."""
    if not url_read:
        url = route_callback_url(route)
    if not url:
        return None  # most routes: one query per request, not two
    tenant = Instance.objects.filter(id=instance_id).values_list("tenant", flat=True).first()
    if tenant is None:
        return None
    return callback_register(instance_id=instance_id, tenant=tenant, url=url, source=CallbackSource.ROUTE, now=now)
