"""What a page receives when its changes are flushed: out-of-band htmx fragments, rendered from
the ledger's current state (so a coalesced burst sends the latest state once, and a replayed or
duplicated change is harmless)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import parse_qs

from django.http import QueryDict
from django.template.loader import render_to_string
from django.utils.html import format_html

from dashboard import access, selectors
from dashboard.actions import available_actions
from dashboard.live.groups import instance_group, tenant_group


@dataclass
class Subscription:
    """What one socket asked for, after the access check."""

    view: str  # "instance" | "instances" | any page name (cursor + registered renderers only)
    tenants: list[str]
    groups: list[str]
    after: int | None
    instance_id: str | None = None
    filters: selectors.InstanceFilters = field(default_factory=selectors.InstanceFilters)
    newest: selectors.Cursor | None = None
    count_new: bool = False
    rows: frozenset[str] = frozenset()
    query: dict[str, list[str]] = field(default_factory=dict)
    # The instance page as this socket's last push left it: its steps (history labels) and the
    # newest history row it shows. None until the first push, which sends the page whole.
    shown_steps: frozenset[str] | None = None
    shown_history: int = 0


@dataclass
class Pending:
    """Changes noted since the last push."""

    cursor: int = 0
    instances: set[str] = field(default_factory=set)
    created: bool = False
    kinds: set[str] = field(default_factory=set)
    steps: set[str] = field(default_factory=set)  # history labels of the steps that changed

    def note(self, change: dict[str, Any]) -> None:
        self.cursor = max(self.cursor, int(change["id"]))
        if change.get("instance_id"):
            self.instances.add(change["instance_id"])
        if change.get("kind") == "instance.created":
            self.created = True
        self.kinds.add(change.get("kind", ""))
        if change.get("step_name"):
            self.steps.add(change["step_name"])

    def __bool__(self) -> bool:
        return bool(self.cursor or self.instances or self.created)


class Forbidden(Exception):
    pass


def subscription_for(user: Any, query_string: str) -> Subscription:
    """Parse the socket's query and check access. Raises Forbidden for another tenant's instance."""
    raw = parse_qs(query_string, keep_blank_values=False)
    view = (raw.get("view") or ["page"])[0][:40]
    tenants = access.tenants_for(user)
    after_raw = (raw.get("after") or [""])[0]
    after = int(after_raw) if after_raw.isdigit() else None
    instance_id = (raw.get("instance") or [""])[0]
    if view == "instance" or instance_id:
        inst = selectors.instance_get(user=user, instance_id=instance_id)
        if inst is None:
            raise Forbidden(instance_id)
        return Subscription("instance", [inst.tenant], [instance_group(inst.id)], after, instance_id=inst.id, query=raw)
    qd = QueryDict(query_string)
    filters = selectors.InstanceFilters.from_query(qd, paging=False)  # its `after` is the history's
    visible = [t for t in tenants if not filters.tenant or t == filters.tenant]
    newest_raw = qd.get("newest", "")
    rows = frozenset(r for r in qd.get("rows", "").split(",") if r)
    return Subscription(
        view,
        visible,
        [tenant_group(t) for t in visible],
        after,
        filters=filters,
        newest=selectors.Cursor.decode(newest_raw) if newest_raw not in ("", "empty") else None,
        count_new=bool(newest_raw),
        rows=rows,
        query=raw,
    )


def cursor_fragment(cursor: int) -> str:
    return format_html('<div id="rl-live-cursor" hx-swap-oob="true" data-live-cursor="{}" hidden></div>', cursor)


# Changes that touch some steps and nothing else: the instance page gets those steps' rows, not
# every row again (a run of 50 steps re-sent whole was 160 KB a push, most of the render and of the
# browser's work, for one step turning green).
# A step's moves through its life: each changes that step's row and its run's DAG.
STEP_MOVES = frozenset({"step.started", "step.completed", "step.retry", "step.failed", "step.sleep", "step.wait"})
STEP_KINDS = STEP_MOVES | {"step.progress", "step.log", "cost.recorded"}


def step_label(name: str, seq: int) -> str:
    """A step as history rows name it (the engine's label): `name`, or `name#2` for its 2nd call."""
    return name if seq == 1 else f"{name}#{seq}"


def render_instance(user: Any, sub: Subscription, pending: Pending) -> str:
    if not sub.instance_id or sub.instance_id not in pending.instances:
        return ""
    detail = selectors.instance_detail(user=user, instance_id=sub.instance_id)
    if detail is None:
        return ""
    context: dict[str, Any] = {
        "d": detail,
        "i": detail.instance,
        "actions": available_actions(detail.instance) if detail.can_act else [],
    }
    labels = [step_label(v.step.name, v.step.seq) for v in detail.steps]
    steps_now = frozenset(labels)
    newest = max((h.id for h in detail.history), default=sub.shown_history)
    shown = sub.shown_steps
    # Steps that started since the last push come after the ones shown (steps are listed in the
    # order the run asked for them): appended. Anything else (a step gone, one in the middle, the
    # instance's own status changing) sends the page whole.
    kept = len(shown) if shown is not None else 0
    partial = (
        shown is not None
        and frozenset(labels[:kept]) == shown
        and not detail.steps_hidden
        and pending.kinds <= STEP_KINDS
        and not pending.created
        and bool(shown)
    )
    if partial:
        context.update(
            changed_steps=[v for label, v in zip(labels[:kept], detail.steps, strict=False) if label in pending.steps],
            added_steps=detail.steps[kept:],
            costs_changed="cost.recorded" in pending.kinds,
            new_history=[h for h in detail.history if h.id > sub.shown_history],
        )
    sub.shown_steps, sub.shown_history = steps_now, newest
    return render_to_string(f"runs/instance_detail.html#{'live_steps' if partial else 'live'}", context)


def render_instances(user: Any, sub: Subscription, pending: Pending) -> list[str]:
    parts: list[str] = []
    if sub.count_new and pending.created:
        n = selectors.instance_count_newer(user=user, filters=sub.filters, than=sub.newest)
        if n:
            label = "99+" if n >= 100 else str(n)
            href = "?" + sub.filters.querystring()
            parts.append(
                format_html(
                    '<a id="new-rows" class="new-rows" hx-swap-oob="true" href="{}" aria-live="polite">'
                    "{} new instance{} — show newest</a>",
                    href,
                    label,
                    "" if n == 1 else "s",
                )
            )
    messages = ["".join(parts)]
    changed = [i for i in pending.instances if i in sub.rows]
    if changed:
        # Rows travel in a message of their own: an HTML fragment that starts with <tr> parses as
        # table rows, while a <tr> after other elements is dropped by the parser.
        rows = selectors.instance_rows(user=user, ids=changed)
        messages.append("".join(render_to_string("runs/instance_list.html#row", {"i": r, "oob": True}) for r in rows))
    return messages


Renderer = Callable[[Any, Subscription, Pending], "str | list[str]"]
RENDERERS: dict[str, Renderer] = {"instance": render_instance, "instances": render_instances}


# Seconds between two pushes to one socket, per view; views not listed use the consumer's default.
MIN_INTERVALS: dict[str, float] = {}


def register(view: str, renderer: Renderer, *, min_interval: float | None = None) -> None:
    """Other page families add their live fragments here (their page sets `view=<name>`).
    `min_interval` throttles pages whose render is costly (aggregates) below the default rate."""
    RENDERERS[view] = renderer
    if min_interval is not None:
        MIN_INTERVALS[view] = min_interval


def render_push(user: Any, sub: Subscription, pending: Pending) -> list[str]:
    """The messages of one flush: the page's fragments, the first one stamped with the cursor the
    browser resumes from. A renderer returns one HTML string or several (parsed separately)."""
    renderer = RENDERERS.get(sub.view)
    out = renderer(user, sub, pending) if renderer else ""
    messages = [out] if isinstance(out, str) else list(out)
    if not messages:
        messages = [""]
    if pending.cursor:
        messages[0] += cursor_fragment(pending.cursor)
    return [m for m in messages if m.strip()]
