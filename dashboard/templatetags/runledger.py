"""Presentation helpers shared by every dashboard page: status pills, times, durations, money.

`<time>` elements carry an ISO datetime; static/js/runledger.js rewrites them into relative text
with the absolute time (in the browser's time zone) as the tooltip. Without JavaScript the
server's UTC rendering stays readable.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from decimal import ROUND_HALF_UP, Decimal
from typing import Any
from urllib.parse import parse_qsl

from django import template
from django.utils import timezone
from django.utils.html import format_html
from django.utils.safestring import SafeString, mark_safe

from dashboard import access
from dashboard.submissions import FIELD, submission_token
from ingest.engine import public_text, public_value

register = template.Library()

STATUS_LABELS = {
    "queued": "queued",
    "running": "running",
    "paused": "paused",
    "waiting": "waiting",
    "waitingForPause": "pausing",
    "complete": "complete",
    "errored": "errored",
    "completed_with_errors": "with errors",
    "terminated": "terminated",
    # step statuses
    "sleeping": "sleeping",
    "pending": "pending",
    "open": "open",
    "redriven": "redriven",
    "discarded": "discarded",
    "approved": "approved",
    "rejected": "rejected",
    "expired": "expired",
}


@register.simple_tag
def submission_field() -> SafeString:
    """The hidden one-time token of a form that acts (dashboard.submissions): submitted twice,
    the form acts once and the second submit shows the first one's answer."""
    return format_html('<input type="hidden" name="{}" value="{}">', FIELD, submission_token())


@register.simple_tag
def status_pill(status: str, label: str = "") -> SafeString:
    """A coloured pill that also spells the status out (colour is never the only signal)."""
    text = label or STATUS_LABELS.get(status, status or "unknown")
    return format_html(
        '<span class="status status-{}" title="status: {}">'
        '<span class="status-dot" aria-hidden="true"></span>{}</span>',
        status or "unknown",
        status or "unknown",
        text,
    )


@register.simple_tag
def status_label(status: str) -> str:
    """The word a status pill spells, without the pill."""
    return STATUS_LABELS.get(status, status or "unknown")


def _as_seconds(value: Any) -> float | None:
    if value is None or value == "":
        return None
    if isinstance(value, timedelta):
        return value.total_seconds()
    try:
        return float(value)
    except (TypeError, ValueError):
        return None


def format_duration(seconds: float | None) -> str:
    if seconds is None:
        return "—"
    if seconds < 0:
        seconds = 0.0
    if seconds < 1:
        return f"{seconds * 1000:.0f} ms"
    if seconds < 60:
        return f"{seconds:.1f} s" if seconds < 10 else f"{seconds:.0f} s"
    minutes, sec = divmod(int(round(seconds)), 60)
    if minutes < 60:
        return f"{minutes}m {sec:02d}s"
    hours, minutes = divmod(minutes, 60)
    if hours < 48:
        return f"{hours}h {minutes:02d}m"
    days, hours = divmod(hours, 24)
    return f"{days}d {hours}h"


@register.filter
def entries(value: Any) -> list[tuple[Any, Any]]:
    """A dict's (key, value) pairs: `{% for k, v in d|entries %}`. `d.items` in a template is the
    value under the key "items" when there is one (a fan-out's params often have it)."""
    return list(value.items()) if isinstance(value, dict) else []


@register.filter
def query_text(value: Any) -> str:
    """A stored query string as a person reads it: `attr=customer:acme · status=errored`, not
    `attr=customer%3Aacme&status=errored`."""
    if not isinstance(value, str) or not value:
        return ""
    return " · ".join(f"{k}={v}" for k, v in parse_qsl(value, keep_blank_values=True))


@register.filter
def duration(value: Any) -> str:
    """Seconds (number) or a timedelta as `850 ms`, `4.2 s`, `3m 05s`, `2h 10m`, `3d 4h`."""
    return format_duration(_as_seconds(value))


@register.simple_tag
def between(start: datetime | None, end: datetime | None) -> str:
    """Duration between two datetimes; an open interval runs until now."""
    if start is None:
        return "—"
    return format_duration(((end or timezone.now()) - start).total_seconds())


@register.simple_tag
def reltime(value: datetime | None, fmt: str = "relative") -> SafeString:
    """`<time>` with ISO datetime; JS shows it relative (`3 min ago`) or absolute (fmt="absolute")."""
    if value is None:
        return mark_safe('<span class="muted">—</span>')  # a constant: nothing to escape
    utc = value.astimezone(UTC) if timezone.is_aware(value) else value
    return format_html(
        '<time datetime="{}" data-format="{}" title="{} UTC">{}</time>',
        utc.isoformat(),
        fmt,
        utc.strftime("%Y-%m-%d %H:%M:%S"),
        utc.strftime("%Y-%m-%d %H:%M:%S UTC"),
    )


@register.filter
def money(value: Any, currency: str = "$") -> str:
    """Decimal dollars: 4 decimals below $1 (API calls are cheap), 2 above; `—` for None."""
    if value is None or value == "":
        return "—"
    try:
        amount = Decimal(str(value))
    except ArithmeticError:
        return str(value)
    places = Decimal("0.0001") if abs(amount) < 1 else Decimal("0.01")
    q = amount.quantize(places, rounding=ROUND_HALF_UP)
    sign = "-" if q < 0 else ""
    return f"{sign}{currency}{abs(q):,}"


@register.filter
def public(value: Any) -> str:
    """Stored text as it may be shown: a sealed secret (a sensitive step's failure) reads "redacted"."""
    return public_text(str(value or ""))


@register.filter
def pretty_json(value: Any) -> str:
    value = public_value(value)
    return json.dumps(value, indent=2, sort_keys=True, ensure_ascii=False, default=str)


@register.filter
def json_summary(value: Any) -> str:
    """One line describing a JSON value, so a step's output reads at a glance."""
    value = public_value(value)
    if value is None:
        return "no output"
    if isinstance(value, dict):
        keys = list(value)
        shown = ", ".join(str(k) for k in keys[:5])
        more = f" +{len(keys) - 5}" if len(keys) > 5 else ""
        return f"object · {len(keys)} key{'' if len(keys) == 1 else 's'}: {shown}{more}"
    if isinstance(value, list):
        return f"list · {len(value)} item{'' if len(value) == 1 else 's'}"
    text = json.dumps(value, ensure_ascii=False, default=str)
    return text if len(text) <= 80 else text[:77] + "…"


@register.simple_tag(takes_context=True)
def nav_link(context: template.Context, href: str, label: str, exact: bool = False) -> SafeString:
    request = context.get("request")
    path = getattr(request, "path", "")
    active = path == href if exact else path.startswith(href)
    if active:
        return format_html('<a href="{}" aria-current="page" class="active">{}</a>', href, label)
    return format_html('<a href="{}">{}</a>', href, label)


@register.inclusion_tag("runs/_nav_user.html", takes_context=True)
def nav_user(context: template.Context) -> dict[str, Any]:
    """The signed-in user, their role and tenants (memoised on the user by dashboard.access)."""
    user = context.get("user")
    memberships = access.memberships_for(user) if user is not None else {}
    return {"user": user, "memberships": sorted(memberships.items())}


@register.filter
def get_item(mapping: Any, key: Any) -> Any:
    try:
        return mapping[key]
    except (KeyError, IndexError, TypeError):
        return None


@register.filter
def params_inline(value: Any, limit: int = 120) -> str:
    """`key=value · key=value` for a params object: what an operator scans for in a list."""
    value = public_value(value)
    if not isinstance(value, dict):
        return json_summary(value)
    parts = []
    for k, v in value.items():
        shown = v if isinstance(v, str) else json.dumps(v, ensure_ascii=False, default=str)
        parts.append(f"{k}={shown}")
    text = " · ".join(parts) or "{}"
    return text if len(text) <= limit else text[: limit - 1] + "…"


@register.filter
def json_value(value: Any) -> str:
    """A params value as an operator reads it: strings bare, everything else as compact JSON."""
    value = public_value(value)
    if isinstance(value, str):
        return value
    return json_summary(value) if isinstance(value, (dict, list)) else json.dumps(value, default=str)
