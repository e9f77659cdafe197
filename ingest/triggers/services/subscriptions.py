"""Event subscriptions defined by operators: create, edit, enable or disable, delete, and their
debounce or batch. Every field is checked before any row changes and every wrong field is
reported at once (`subscription_problems`, pure), so the console, the REST API and the CLI refuse
the same input with the same messages."""

from __future__ import annotations

import re
from typing import Any

from django.db import transaction

from ingest.triggers import coalesce as coalescing
from ingest.triggers.errors import (
    InvalidCoalesce,
    InvalidSubscription,
    SubscriptionNotFound,
    TriggerError,
)
from ingest.triggers.field_checks import UNSET, tenant_problem, workflow_problem
from ingest.triggers.models import Subscription

# A glob over event types (patterns.EVENT_TYPE's characters, plus fnmatch's * ? [ ] !).
PATTERN_PATTERN = r"^[A-Za-z0-9_.:/*?\[\]!-]{1,200}$"
_PATTERN = re.compile(PATTERN_PATTERN)
EDITABLE = ("workflow", "pattern", "filters", "enabled")
FILTERS_MAX = 20
FILTER_KEY_MAX = 200
FILTER_VALUES_MAX = 50
_SCALAR = (str, int, float, bool, type(None))


def _filters_problem(filters: Any) -> str | None:
    if not isinstance(filters, dict):
        return 'filters are a JSON object of payload fields, such as {"plan": "pro"}'
    if len(filters) > FILTERS_MAX:
        return f"at most {FILTERS_MAX} filter fields"
    for key, value in filters.items():
        if not isinstance(key, str) or not key or len(key) > FILTER_KEY_MAX or key.strip() != key:
            return (
                f"a filter's field is a dotted path of 1 to {FILTER_KEY_MAX} characters, such as plan or account.tier"
            )
        values = value if isinstance(value, list) else [value]
        if len(values) > FILTER_VALUES_MAX or not all(isinstance(v, _SCALAR) for v in values):
            return (
                f"filter {key[:60]!r}: a value is text, a number, true, false or null, or a list of at most "
                f"{FILTER_VALUES_MAX} of them (any of which matches)"
            )
    return None


def subscription_problems(fields: dict[str, Any], *, tenant: Any = UNSET) -> dict[str, str]:
    """What is wrong with a subscription's fields, by field name (empty when nothing is). `tenant`
    is checked when given ("" is every tenant's events)."""
    problems: dict[str, str] = {}
    if tenant is not UNSET and tenant != "" and (problem := tenant_problem(tenant)):
        problems["tenant"] = problem + ", or empty for every tenant's events"
    if "workflow" in fields and (problem := workflow_problem(fields["workflow"])):
        problems["workflow"] = problem
    if "pattern" in fields and not (isinstance(fields["pattern"], str) and _PATTERN.match(fields["pattern"])):
        problems["pattern"] = (
            "an event type pattern is a glob of 1 to 200 letters, digits, . _ - : / and the "
            "wildcards * ? [ ] !, such as user.* or gong.call.*"
        )
    if "filters" in fields and (problem := _filters_problem(fields["filters"])):
        problems["filters"] = problem
    if "enabled" in fields and not isinstance(fields["enabled"], bool):
        problems["enabled"] = "true or false"
    unknown = set(fields) - set(EDITABLE)
    if unknown:
        problems["__all__"] = f"subscription fields {sorted(unknown)} are unknown; use {list(EDITABLE)}"
    return problems


def subscription_create(
    *, workflow: Any, pattern: Any, filters: Any = UNSET, tenant: Any = "", enabled: Any = True, coalesce: Any = None
) -> Subscription:
    """A new subscription: events of `tenant` ("" : of every tenant) whose type matches `pattern`
    and whose payload matches `filters` start `workflow`. InvalidSubscription names every wrong
    field at once (the coalesce setting too) and writes nothing."""
    fields = {
        "workflow": workflow,
        "pattern": pattern,
        "filters": {} if filters is UNSET else filters,
        "enabled": enabled,
    }
    problems = subscription_problems(fields, tenant=tenant)
    try:
        if coalesce is not None and not isinstance(coalesce, dict):
            raise InvalidCoalesce(
                'coalesce is an object such as {"debounce": {"key": "account", "period": '
                '"30 seconds"}}, or null for none'
            )
        coalescing.parse(coalesce)
    except TriggerError as exc:
        problems["coalesce"] = str(exc)
    if problems:
        raise InvalidSubscription(problems=problems)
    return Subscription.objects.create(tenant=tenant, coalesce=coalesce or {}, **fields)


def _locked(subscription_id: int) -> Subscription:
    sub = Subscription.objects.select_for_update().filter(pk=subscription_id).first()
    if sub is None:
        raise SubscriptionNotFound(f"no subscription has id {subscription_id}")
    return sub


def subscription_update(*, subscription_id: int, **fields: Any) -> Subscription:
    """Change a subscription's workflow, pattern, filters or state (not its tenant); nothing
    changes on InvalidSubscription. Events published from now on are matched against it."""
    problems = subscription_problems(fields)
    if problems:
        raise InvalidSubscription(problems=problems)
    with transaction.atomic():
        sub = _locked(subscription_id)
        for key, value in fields.items():
            setattr(sub, key, value)
        sub.save(update_fields=list(fields))
    return sub


def subscription_set_enabled(*, subscription_id: int, enabled: bool) -> Subscription:
    """Enable or disable: a disabled subscription starts nothing for the events published meanwhile."""
    return subscription_update(subscription_id=subscription_id, enabled=enabled)


def subscription_delete(*, subscription_id: int) -> Subscription:
    """Delete a subscription: it starts nothing more. The instances it started stay, and a debounce
    or batch window still open starts its instance when due."""
    with transaction.atomic():
        sub = _locked(subscription_id)
        gone = Subscription(pk=sub.pk, workflow=sub.workflow, pattern=sub.pattern, tenant=sub.tenant)
        sub.delete()
    return gone


def subscription_coalesce_set(*, subscription_id: int, coalesce_setting: dict[str, Any] | None) -> Subscription:
    """Set (or, with None or {}, clear) a subscription's debounce or batch; InvalidCoalesce changes nothing."""
    config = coalescing.parse(coalesce_setting)
    with transaction.atomic():
        sub = _locked(subscription_id)
        sub.coalesce = coalesce_setting if config is not None and coalesce_setting else {}
        sub.save(update_fields=["coalesce"])
    return sub
